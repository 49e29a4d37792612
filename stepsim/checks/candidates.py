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

Under successive halving (``tuning.halving``, :mod:`stepsim.checks.halving`; a group made
with ``halving``) not every candidate runs to T: each regulariser value's lr grid climbs
rungs of T/4 and T/2 (their own RunSpecs, ``steps`` the rung) and only the finalists run to
T. :func:`pending` gives the runs whose turn has come, :func:`planned` every run the
group's tuning will make; the choice and the tie set are made among the candidates run to
T, and every candidate's mean is read at the highest rung it reached (``reached``).

Pure: nothing is run or read from disk here.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

from stepsim.checks import halving as halving_rule


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
          extended=(), *, halving=None, finalist_lrs=()) -> dict:
    """The tuning of one config: {"grid" (lrs), "options" (option -> grid), "candidates",
    "tasks" (every candidate's run to T, candidate-major, seeds inner), "seeds",
    "extended" (the (grid, side) pairs extended so far), "tuner", "key", "halving" (the
    registered rule when this config is halved, else None), "rungs" (steps -> every
    candidate's runs of that many steps, the T/4 and T/2 rungs; {} without halving),
    "finalist_lrs" (lrs an edge extension added: they run to T at once)}. tuner: the
    Budget the runs are made with (its tuning seeds and T)."""
    made = pairs(lrs, grids)

    def runs(budget):
        return [budget.run(recipe, seed, nm=nm, m=m, optimizer=optimizer, lr=c["lr"],
                           regularisers={k: v for k, v in c.items() if k != "lr"},
                           evaluate=False)
                for c in made for seed in budget.seeds]

    rungs = {}
    if halving is not None:
        for at in halving_rule.ladder(halving, tuner.steps)[:-1]:
            rungs[at] = runs(dataclasses.replace(tuner, steps=at))
    return {"grid": [float(x) for x in lrs], "options": dict(grids), "candidates": made,
            "tasks": runs(tuner), "seeds": len(tuner.seeds), "extended": tuple(extended),
            "tuner": tuner, "key": key, "recipe": recipe, "optimizer": optimizer,
            "nm": nm, "m": m, "halving": halving, "rungs": rungs,
            "finalist_lrs": tuple(float(x) for x in finalist_lrs)}


def steps_of(g: dict) -> int:
    """T of a config's tuning runs."""
    return int(g["tuner"].steps)


def runs_at(g: dict, i: int, steps: int) -> list:
    """Candidate ``i``'s runs of ``steps`` steps (T or a rung's), one per tuning seed."""
    per = g["seeds"]
    every = g["tasks"] if steps == steps_of(g) else g["rungs"][steps]
    return every[i * per:(i + 1) * per]


def lanes(g: dict) -> list[list[tuple[int, float]]]:
    """Per regulariser value (every combination of the options' values) its halved
    candidates, [(index, lr), ...] in the lr grid's order: every lr but an edge
    extension's."""
    out = {}
    for i, c in enumerate(g["candidates"]):
        if c["lr"] in g["finalist_lrs"]:
            continue
        out.setdefault(tuple(c[n] for n in g["options"]), []).append((i, c["lr"]))
    return list(out.values())


def climbed(g: dict, score) -> tuple[dict, list]:
    """(reached, pending) of group ``g`` (``halving.climb``) under ``score(i, steps)``; a
    group without halving runs every candidate to T."""
    T = steps_of(g)
    if g.get("halving") is None:
        every = range(len(g["candidates"]))
        return {i: T for i in every}, [(i, T) for i in every if score(i, T) is None]
    extra = [i for i, c in enumerate(g["candidates"]) if c["lr"] in g["finalist_lrs"]]
    return halving_rule.climb(g["halving"], lanes(g), extra, T, score)


def _mean(views) -> float:
    return (math.inf if any(v["diverged"] for v in views)
            else sum(validation_error(v) for v in views) / len(views))


def _known(g: dict, results: dict):
    """score(i, steps): candidate i's mean validation error at ``steps``, None while one of
    its runs is not in ``results``."""
    def score(i, steps):
        runs = runs_at(g, i, steps)
        if any(t.digest not in results for t in runs):
            return None
        return _mean([results[t.digest] for t in runs])
    return score


def pending(g: dict, results: dict) -> list:
    """The runs of group ``g`` whose turn has come and that ``results`` lacks: every
    candidate's runs to T (no halving), or the next rung's of each lane."""
    _, todo = climbed(g, _known(g, results))
    return [t for i, steps in todo for t in runs_at(g, i, steps)
            if t.digest not in results]


def planned(g: dict) -> list:
    """Every run group ``g``'s tuning makes before any edge extension, in number and
    steps: the first rung's runs are the real ones; a later rung's are stand-ins (the
    smallest lrs of each lane: which lrs go on is known only from the runs)."""
    reached, _ = climbed(g, lambda i, steps: 0.0)
    rungs = sorted({*g["rungs"], steps_of(g)})
    return [t for i, top in sorted(reached.items()) for at in rungs if at <= top
            for t in runs_at(g, i, at)]


def scores(g: dict, results: dict) -> tuple[list[float], list[list], list[int]]:
    """(per candidate its mean validation error over the tuning seeds at the highest rung
    it reached, +inf when a run diverged; per candidate each seed's view there; per
    candidate the steps of that rung: T unless halving stopped it earlier)."""
    reached, todo = climbed(g, _known(g, results))
    if todo:
        raise ValueError(f"the tuning of {g['key']} is not finished: {len(todo)} "
                         "candidate(s) still have runs to make")
    means, views, steps = [], [], []
    for i, _ in enumerate(g["candidates"]):
        vs = [results[t.digest] for t in runs_at(g, i, reached[i])]
        views.append(vs)
        means.append(_mean(vs))
        steps.append(int(reached[i]))
    return means, views, steps


def at_full_length(g: dict, means: list[float], steps: list[int]) -> list[float]:
    """``means`` with every candidate not run to T at +infinity: what the choice and the
    tie set read (they are made among the candidates run to T)."""
    T = steps_of(g)
    return [m if s == T else math.inf for m, s in zip(means, steps)]


def validation_error(view: dict) -> float:
    """A run's error on the validation split (its test error when the problem has none)."""
    return float(view["validation_error"] if "validation_error" in view else view["error"])


def best(g: dict, means: list[float]) -> int:
    """The index of the chosen candidate: the lowest mean, then the smaller regulariser
    (in the options' registered order), then the smaller lr (``means``: those run to T,
    :func:`at_full_length`)."""
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
    means, _, steps = scores(g, results)
    chosen = g["candidates"][best(g, at_full_length(g, means, steps))]
    for name, side in edges(g, chosen):
        if (name, side) in g["extended"]:
            continue
        lrs, grids = list(g["grid"]), dict(g["options"])
        grid = lrs if name == "lr" else list(grids[name])
        value = beyond(grid, side)
        grid = [value, *grid] if side == "low" else [*grid, value]
        finalists = g["finalist_lrs"]
        if name == "lr":
            lrs = grid
            # halved: the new lr runs to T at once, a finalist of every regulariser value
            finalists = (*finalists, value) if g["halving"] is not None else finalists
        else:  # halved: the new regulariser value's lr grid climbs the rungs on its own
            grids[name] = tuple(grid)
        # the candidates run before are the same RunSpecs again (a store has them)
        return group(g["tuner"], g["key"], g["recipe"], g["optimizer"], g["nm"], g["m"], lrs,
                     grids, (*g["extended"], (name, side)), halving=g["halving"],
                     finalist_lrs=finalists)
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
    "means" (each candidate's at the highest rung it reached), "reached" (that rung's steps:
    T unless successive halving stopped the candidate earlier), "steps" (T), "choice" (a
    candidate run to T), "edge" (the ends of the final grids the choice sits at, "lr low",
    "lam high", ...; None), "extended", "errors" (per lr at the chosen regularisers, each
    seed's validation error at the highest rung that lr reached, None for a diverged run:
    the stability map's input), "tie" (candidates run to T)}."""
    means, views, reached = scores(g, results)
    full = at_full_length(g, means, reached)
    i = best(g, full)
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
            "reached": reached, "steps": steps_of(g),
            "choice": chosen, "edge": ", ".join(f"{n} {s}" for n, s in at) or None,
            "extended": [f"{n} {s}" for n, s in g["extended"]], "errors": errors,
            "tie": tied(g, views, full, i, se, margin, units)}


__all__ = [
    "at_full_length",
    "best",
    "beyond",
    "choose",
    "climbed",
    "edges",
    "extend",
    "group",
    "lanes",
    "pairs",
    "pending",
    "planned",
    "regularisers",
    "runs_at",
    "scores",
    "steps_of",
    "tied",
    "validation_error",
]
