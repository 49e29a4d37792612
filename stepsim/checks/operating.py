"""Operating points of STEP (PROTOCOL.md "Draft 4"): tie sets, the stability map, the plateau.

Pure functions of numbers (no runs, no NumPy at import):

* :func:`tie_set` — the grid values statistically tied with a config's choice ("Tie-aware
  tuning"): no tuning run diverged there and the mean paired difference to the choice
  over the tuning seeds is at most ``se`` standard errors of that difference.
* :func:`clopper_pearson` — the exact two-sided interval of a divergence rate k / n.
* :func:`stability_rows` / :func:`stability_map` — per config, error and divergence rate
  against the learning rate, the smallest diverging and the largest stable lr, and STEP's
  stable range relative to SR-STE's ("Stability map"), from the tuning table.
* :func:`plateau_ratio` / :func:`on_plateau` — the batch loss at the switch relative to
  the start, and whether the switch fell on the initial plateau ("Switch premises").
* :func:`switch_findings` — per setting, how AutoSwitch's runs switched: causes and plateau.
"""

from __future__ import annotations

import math
import statistics

from stepsim.checks import protocol

STEP_RECIPES = ("step-a1", "step-sr")


# --------------------------------------------------------------------------- tie set
def tie_set(grid, per_seed, choice, *, se: float | None = None) -> list[float]:
    """The grid values tied with ``choice`` (PROTOCOL.md "Tie-aware tuning"), in grid order.

    grid: the lrs; per_seed: per lr, the final error of each tuning seed (paired by
    position; None or a non-finite value for a run that diverged); choice: the chosen lr
    (a grid value). lr is tied iff none of its runs diverged and mean(d) <= se * sd(d) /
    sqrt(n) with d_s = e(lr, s) - e(choice, s) (sd with n - 1; 0 for one seed). ``se``:
    ``RULES.operating_points.tie.se`` unless given. The choice is always in it
    (when its own runs are finite)."""
    if se is None:
        se = float(protocol.RULES.operating_points.tie.se)
    if se < 0 or not math.isfinite(se):
        raise ValueError(f"se must be a finite number >= 0, got {se!r}")
    grid = [float(g) for g in grid]
    if float(choice) not in grid:
        raise ValueError(f"choice {choice!r} is not in the grid {grid}")
    if len(per_seed) != len(grid):
        raise ValueError(f"per_seed must hold one list per grid value ({len(grid)}), "
                         f"got {len(per_seed)}")
    best = list(per_seed[grid.index(float(choice))])
    if not _finite(best):
        return []
    out = []
    for lr, errors in zip(grid, per_seed):
        errors = list(errors)
        if len(errors) != len(best):
            raise ValueError(f"lr {lr:g}: {len(errors)} seeds, the choice has {len(best)}")
        if not _finite(errors):
            continue
        d = [a - b for a, b in zip(errors, best)]
        spread = statistics.stdev(d) if len(d) > 1 else 0.0
        if statistics.fmean(d) <= se * spread / math.sqrt(len(d)):
            out.append(lr)
    return out


def _finite(values) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


# --------------------------------------------------------------------------- stability
def clopper_pearson(k: int, n: int, level: float | None = None) -> tuple[float, float]:
    """The exact two-sided Clopper-Pearson interval of a rate k / n at ``level`` (default
    ``RULES.stability.level``)."""
    from stepsim.theorem1.check import clopper_pearson as cp

    level = float(protocol.RULES.stability.level if level is None else level)
    if not (isinstance(n, int) and n >= 1 and isinstance(k, int) and 0 <= k <= n):
        raise ValueError(f"need integers 0 <= k <= n, n >= 1; got k={k!r}, n={n!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    lo, hi = cp(k, n, level)
    return float(lo), float(hi)


def stability_rows(grid, per_seed, *, level: float | None = None) -> dict:
    """One config's stability over its grid (PROTOCOL.md "Stability map").

    Returns {"lr": grid, "mean": mean error of the finite runs per lr (None if none),
    "finite": their count, "diverged": k per lr, "n": runs per lr, "ci": [(lo, hi)] the
    Clopper-Pearson interval of k / n, "smallest_diverging": the smallest lr with a
    diverged run (None), "largest_stable": the largest lr below it (None when even the
    smallest diverged; the grid's top when none did), "stable_everywhere": bool}."""
    grid = [float(g) for g in grid]
    mean, finite, diverged, ns, ci = [], [], [], [], []
    for errors in per_seed:
        ok = [e for e in errors if e is not None and math.isfinite(e)]
        k, n = len(errors) - len(ok), len(errors)
        mean.append(statistics.fmean(ok) if ok else None)
        finite.append(len(ok))
        diverged.append(k)
        ns.append(n)
        ci.append(clopper_pearson(k, n, level))
    first = next((i for i, k in enumerate(diverged) if k), None)
    largest = grid[-1] if first is None else (grid[first - 1] if first > 0 else None)
    return {"lr": grid, "mean": mean, "finite": finite, "diverged": diverged, "n": ns,
            "ci": ci, "smallest_diverging": None if first is None else grid[first],
            "largest_stable": largest, "stable_everywhere": first is None}


def stability_map(table: dict) -> dict:
    """setting -> N:M label ("-" for dense) -> {recipe key -> stability_rows, and
    "step_vs_srste": {reading: {"ratio", "bound"}}} from a tuning table (``tuning.choose``:
    setting -> config -> {"grid", "errors", ...}); Adam configs only (the STEP question is
    Adam's). ratio = largest stable lr of STEP / of SR-STE; bound "<=" when SR-STE was
    stable on the whole grid (its true range may be wider), "=" otherwise; None when
    either has no stable lr."""
    out = {}
    for setting, configs in table.items():
        per = out.setdefault(setting, {})
        for key, row in sorted(configs.items()):
            optimizer, recipe, nm, m = protocol.parse_key(key)
            if optimizer != "adam" or "errors" not in row:
                continue
            where = "-" if nm is None and m is None else (
                f"M{m}" if m is not None else protocol.nm_label(nm))
            per.setdefault(where, {})[recipe] = stability_rows(row["grid"], row["errors"])
        for where, rows in per.items():
            base = rows.get("sr-ste")
            if base is None:
                continue
            rel = {}
            for recipe in STEP_RECIPES:
                if recipe in rows:
                    a, b = rows[recipe]["largest_stable"], base["largest_stable"]
                    rel[recipe] = {"ratio": None if a is None or b is None else a / b,
                                   "bound": "<=" if base["stable_everywhere"] else "="}
            if rel:
                rows["step_vs_srste"] = rel
    return out


# --------------------------------------------------------------------------- plateau
def plateau_ratio(loss, k0, window: int | None = None) -> float | None:
    """``experiments.traces.plateau_ratio`` at the protocol's window (``plateau.window``):
    the mean batch loss of the window up to k0 over the mean of the first window."""
    from stepsim.experiments.traces import plateau_ratio as ratio

    return ratio(loss, k0, int(protocol.RULES.plateau.window if window is None
                               else window))


def on_plateau(ratio, max_ratio: float | None = None) -> bool | None:
    """True when a switch with plateau ratio ``ratio`` fell on the initial plateau: the
    loss had not fallen below ``max_ratio`` (``RULES.plateau.max_ratio``) of its
    start (a non-finite ratio counts as on the plateau); None without a switch."""
    if ratio is None:
        return None
    if max_ratio is None:
        max_ratio = float(protocol.RULES.plateau.max_ratio)
    return not (math.isfinite(ratio) and ratio <= max_ratio)


def plateau_count(rows) -> tuple[int, int]:
    """(runs switched on the plateau, runs that switched) of switch rows (``causes``)."""
    flags = [r.get("plateau") for r in rows if r.get("plateau") is not None]
    return sum(bool(f) for f in flags), len(flags)


def switch_findings(claims) -> dict:
    """setting -> {"runs", "causes": {cause: count}, "on_plateau", "switched"} over the
    AutoSwitch-switched STEP runs the claims record (``numbers["switches"]`` rows; runs
    shared by claims counted once per claim that reports them)."""
    out = {}
    for c in claims:
        numbers = c.numbers if isinstance(c.numbers, dict) else {}
        switches = numbers.get("switches")
        if not switches:
            continue
        rows = [r for _, group in flat_switches(switches) for r in group]
        f = out.setdefault(c.setting, {"runs": 0, "causes": {}, "on_plateau": 0,
                                       "switched": 0, "claims": []})
        f["claims"].append(c.claim)
        for r in rows:
            f["runs"] += 1
            f["causes"][r["cause"]] = f["causes"].get(r["cause"], 0) + 1
        j, n = plateau_count(rows)
        f["on_plateau"] += j
        f["switched"] += n
    return out


def stability_figure(setting: str, per: dict, path):
    """The stability map of one setting as a figure: one panel per N:M (dense in each),
    mean final error of the finite tuning runs against the lr (log axis) per recipe, and
    the divergence count k/n printed at every lr where a run diverged (a cross at the top
    of the panel). ``per``: :func:`stability_map`'s value for the setting."""
    from stepsim.checks import plots

    plt = plots.pyplot()
    panels = [w for w in sorted(per) if w != "-"] or sorted(per)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    for ax, where in zip(axes[0], panels):
        rows = dict(per[where])
        rows.pop("step_vs_srste", None)
        if where != "-" and "-" in per:
            rows.update({k: v for k, v in per["-"].items() if k != "step_vs_srste"})
        top = max((m for s in rows.values() for m in s["mean"] if m is not None), default=1.0)
        for recipe, s in sorted(rows.items()):
            xs = [lr for lr, m in zip(s["lr"], s["mean"]) if m is not None]
            ys = [m for m in s["mean"] if m is not None]
            (line,) = ax.plot(xs, ys, marker="o", label=recipe)
            for lr, k, n in zip(s["lr"], s["diverged"], s["n"]):
                if k:
                    ax.plot([lr], [top * 1.08], marker="x", color=line.get_color())
                    ax.annotate(f"{k}/{n}", (lr, top * 1.08), textcoords="offset points",
                                xytext=(3, 3), fontsize=7, color=line.get_color())
        ax.set_xscale("log")
        ax.set_xlabel("learning rate (Adam)")
        ax.set_ylabel("final error of the finite runs (problem units)")
        ax.set_title(f"{where}")
        ax.legend(fontsize=7)
    fig.suptitle(f"Stability map, {setting}: error vs lr; x = diverged tuning runs (k/n)")
    return plots.finish(fig, path, "tuning seeds only (never evidence); divergence k/n "
                         "with 95% Clopper-Pearson intervals in the report's table")


def flat_switches(switches, prefix=""):
    """(name, rows) of a nested switches record (a report's switch steps and causes)."""
    for key, value in switches.items():
        if isinstance(value, dict):
            yield from flat_switches(value, f"{prefix}{key} ")
        else:
            yield f"{prefix}{key}", value


__all__ = ["clopper_pearson", "on_plateau", "plateau_count", "plateau_ratio",
           "stability_figure", "stability_map", "stability_rows", "switch_findings",
           "tie_set"]
