"""Tuning by candidates (PROTOCOL.md "Tuning: each baseline's own regulariser", "Tie sets
on validation"): what a config chooses under rules that tune regularisers (draft 5).

A **candidate** is a learning rate, or a (learning rate, regulariser) pair for the recipes
of ``rules.regularisers`` — every pair of the lr grid and the regulariser grids, written
``{"lr": 0.001, "lam": 0.02}``. Each runs once per tuning seed to T; its score is the mean
validation error of those runs (+infinity when one diverged, the blow-up rule included).
The choice is the lowest score; equal scores go to the smaller regulariser, then the
smaller lr.

* :func:`group` — a config's candidates and their tuning runs;
* :func:`extend` — a choice at an end of its lr or regulariser grid extends that grid by
  one value in that direction (:func:`beyond`), once per grid and direction; the new
  candidates run and the config is chosen again;
* :func:`choose` — the choice, its edge flag, every candidate's mean, the per-lr errors at
  the chosen regularisers (the stability map's input) and the tie set: the candidates
  none of whose runs diverged whose mean difference to the choice is at most ``tie.se``
  times its seeds x items standard error on the validation split (:func:`tied`).

Pure: nothing is run or read from disk here.
"""

from __future__ import annotations

import itertools
import math


def regularisers(rules, recipe: str) -> dict:
    """option -> its grid (tuple) of the config recipe ``recipe`` ({} when it has none)."""
    return {k: tuple(v) for k, v in (rules.regularisers or {}).get(recipe, {}).items()}


def pairs(lrs, grids: dict) -> list[dict]:
    """Every candidate of an lr grid and regulariser grids (option -> values): lr-major,
    the options in their registered order."""
    names = list(grids)
    return [{"lr": float(lr), **dict(zip(names, (float(v) for v in combo)))}
            for lr in lrs for combo in itertools.product(*(grids[n] for n in names))]


def beyond(grid, side: str) -> float:
    """The value that continues ``grid`` (increasing, >= 2 values) one step past its
    ``side`` ("low" | "high"): the pattern of its last two steps (a 1-3 grid's 3e-05 below
    1e-4 and 0.1 above 0.03; a decade grid's 2e-05 below 2e-4); a two-value grid repeats
    its ratio. Rounded to 12 significant digits (no float noise in a config's key)."""
    g = [float(x) for x in grid]
    if len(g) < 2 or side not in ("low", "high"):
        raise ValueError(f"beyond needs a grid of >= 2 values and side 'low' or 'high', "
                         f"got {grid!r}, {side!r}")
    if side == "low":
        value = g[0] * g[1] / g[2] if len(g) >= 3 else g[0] * g[0] / g[1]
    else:
        value = g[-1] * g[-2] / g[-3] if len(g) >= 3 else g[-1] * g[-1] / g[-2]
    return float(f"{value:.12g}")


def group(tuner, key: str, recipe: str, optimizer: str, nm, m, lrs, grids: dict,
          extended=()) -> dict:
    """The tuning of one config: {"grid" (lrs), "options" (option -> grid), "candidates",
    "tasks" (candidate-major, seeds inner), "seeds", "extended" (the (grid, side) pairs
    extended so far), "tuner", "key"}. tuner: the Budget the runs are made with (its
    tuning seeds)."""
    made = pairs(lrs, grids)
    tasks = [tuner.run(recipe, seed, nm=nm, m=m, optimizer=optimizer, lr=c["lr"],
                       regularisers={k: v for k, v in c.items() if k != "lr"},
                       evaluate=False)
             for c in made for seed in tuner.seeds]
    return {"grid": [float(x) for x in lrs], "options": dict(grids), "candidates": made,
            "tasks": tasks, "seeds": len(tuner.seeds), "extended": tuple(extended),
            "tuner": tuner, "key": key, "recipe": recipe, "optimizer": optimizer,
            "nm": nm, "m": m}


def scores(g: dict, results: dict) -> tuple[list[float], list[list]]:
    """(per candidate its mean validation error over the tuning seeds, +inf when a run
    diverged; per candidate each seed's view)."""
    per = g["seeds"]
    means, views = [], []
    for i, _ in enumerate(g["candidates"]):
        vs = [results[t.digest] for t in g["tasks"][i * per:(i + 1) * per]]
        views.append(vs)
        means.append(math.inf if any(v["diverged"] for v in vs)
                     else sum(validation_error(v) for v in vs) / len(vs))
    return means, views


def validation_error(view: dict) -> float:
    """A run's error on the validation split (its test error when the problem has none)."""
    return float(view["validation_error"] if "validation_error" in view else view["error"])


def best(g: dict, means: list[float]) -> int:
    """The index of the chosen candidate: the lowest mean, then the smaller regulariser
    (in the options' registered order), then the smaller lr."""
    names = list(g["options"])
    return min(range(len(means)), key=lambda i: (means[i], *(g["candidates"][i][n]
                                                             for n in names),
                                                 g["candidates"][i]["lr"]))


def edges(g: dict, chosen: dict) -> list[tuple[str, str]]:
    """The (grid, side) ends the choice sits at: grid "lr" or a regulariser option."""
    out = []
    for name, grid in [("lr", g["grid"]), *g["options"].items()]:
        if len(grid) < 2:
            continue
        if chosen[name] == grid[0]:
            out.append((name, "low"))
        elif chosen[name] == grid[-1]:
            out.append((name, "high"))
    return out


def extend(g: dict, results: dict) -> dict | None:
    """``g`` with one grid extended past the end its choice sits at (the first such grid
    and side not extended before: ``tuning.edge``, once per grid and direction), the
    candidates of the new value with every value of the other grids added (and their
    runs); None when there is nothing to extend."""
    means, _ = scores(g, results)
    chosen = g["candidates"][best(g, means)]
    for name, side in edges(g, chosen):
        if (name, side) in g["extended"]:
            continue
        lrs, grids = list(g["grid"]), dict(g["options"])
        grid = lrs if name == "lr" else list(grids[name])
        value = beyond(grid, side)
        grid = [value, *grid] if side == "low" else [*grid, value]
        if name == "lr":
            lrs = grid
        else:
            grids[name] = tuple(grid)
        # the candidates run before are the same RunSpecs again (a store has them)
        return group(g["tuner"], g["key"], g["recipe"], g["optimizer"], g["nm"], g["m"], lrs,
                     grids, (*g["extended"], (name, side)))
    return None


def tied(g: dict, views: list, means: list[float], choice: int, se: float, margin: float,
         units: str) -> list[dict]:
    """The tie set (PROTOCOL.md "Tie sets on validation"): the candidates (the choice
    included) none of whose runs diverged with mean(d) <= ``se`` x SE(d), d_s the seed's
    validation error minus the choice's, SE the seeds x items standard error of draft 4's
    statistics (the spread of the seeds and the shared validation set's item noise)."""
    import numpy as np

    from stepsim import stats
    from stepsim.checks.verdict import effect_from

    if not math.isfinite(means[choice]):
        return []
    base = views[choice]
    out = []
    for c, vs, m in zip(g["candidates"], views, means):
        if not math.isfinite(m):
            continue
        if vs is base:
            out.append(c)
            continue
        d = [validation_error(a) - validation_error(b) for a, b in zip(vs, base)]
        z = np.stack([np.asarray(_items(a), dtype=np.float64)
                      - np.asarray(_items(b), dtype=np.float64) for a, b in zip(vs, base)])
        shared, df = stats.shared_test_variance(z)
        e = effect_from(d, name="d", units=units, margin=margin, shared_test_var=shared,
                        test_df=df)
        spread = math.sqrt(e.se_seeds ** 2 + e.se_test ** 2) if len(d) > 1 else 0.0
        if e.estimate <= se * spread:
            out.append(c)
    return out


def _items(view: dict):
    return view["validation_items"] if "validation_items" in view else view["items"]


def choose(g: dict, results: dict, rules, *, margin: float, units: str) -> dict:
    """The table row of config group ``g``: {"grid" (lrs, extended), "options", "candidates",
    "means", "choice" (a candidate), "edge" (the ends of the final grids the choice sits
    at, "lr low", "lam high", ...; None), "extended", "errors" (per lr at the chosen
    regularisers, each seed's validation error, None for a diverged run: the stability
    map's input), "tie" (candidates)}."""
    means, views = scores(g, results)
    i = best(g, means)
    chosen = dict(g["candidates"][i])
    regs = {k: v for k, v in chosen.items() if k != "lr"}
    errors = []
    for lr in g["grid"]:
        j = next(k for k, c in enumerate(g["candidates"])
                 if c["lr"] == lr and all(c[n] == v for n, v in regs.items()))
        errors.append([None if v["diverged"] else validation_error(v) for v in views[j]])
    at = edges(g, chosen)
    se = float(rules.tie.se) if rules.tie is not None else float(
        rules.operating_points.tie.se)
    return {"grid": list(g["grid"]), "options": {k: list(v) for k, v in g["options"].items()},
            "candidates": [dict(c) for c in g["candidates"]], "means": means,
            "choice": chosen, "edge": ", ".join(f"{n} {s}" for n, s in at) or None,
            "extended": [f"{n} {s}" for n, s in g["extended"]], "errors": errors,
            "tie": tied(g, views, means, i, se, margin, units)}


__all__ = [
    "best",
    "beyond",
    "choose",
    "edges",
    "extend",
    "group",
    "pairs",
    "regularisers",
    "scores",
    "tied",
    "validation_error",
]
