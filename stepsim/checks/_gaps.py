"""What the gap claims (C5, C6) share: each recipe's run, the gap to dense per seed and
N:M, each (baseline, N:M) part decided by the generic rule, and the figure."""

from __future__ import annotations

from stepsim.checks import _plots
from stepsim.checks._setup import MARGIN, gaps
from stepsim.checks.verdict import combine, decide, effect_of

ADAM = {"optimizer": "adam", "lr": 1e-3}
STEP_CRITERION = ("autoswitch", {"clip": True})


def recipe_job(budget, recipe, seed, nm=None):
    """The job of one recipe of the gap claims (C5, C6) at one seed and N:M."""
    if recipe == "dense":
        return budget.fit("dense", seed, **ADAM)
    if recipe == "step":
        return budget.fit("step", seed, nm=nm, criterion=STEP_CRITERION[0],
                          criterion_options=STEP_CRITERION[1], **ADAM)
    if recipe == "asp":
        return budget.fit("asp", seed, nm=nm, prune_at=0.5, **ADAM)
    return budget.fit(recipe, seed, nm=nm, **ADAM)


def gap_jobs(budget, nms, baselines):
    out = [recipe_job(budget, "dense", s) for s in budget.seeds]
    for nm in nms:
        for r in ("step", *baselines):
            out += [recipe_job(budget, r, s, nm) for s in budget.seeds]
    return out


def gap_parts(budget, results, nms, baselines, part_effect):
    """Decide every (baseline, N:M) part; returns (parts, gap table, effects)."""
    dense = [recipe_job(budget, "dense", s) for s in budget.seeds]
    parts, table, effects = {}, {}, {}
    for nm in nms:
        label = f"{nm[0]}:{nm[1]}"
        g = {}
        for r in ("step", *baselines):
            g[r], units = gaps(results, [recipe_job(budget, r, s, nm) for s in budget.seeds],
                               dense)
        table[label] = g
        for b in baselines:
            effect = part_effect(g[b], g["step"], label, b, units)
            base = effect_of(g[b], name="gap", units=units, margin=MARGIN[units])
            disc = base.n >= 2 and base.ci_low > 0
            verdict, reason = decide(effect, discriminates=disc, why_not=(
                f"too easy: {b}'s gap to dense at {label} is not above 0 "
                f"({base.estimate:.3g} [{base.ci_low:.3g}, {base.ci_high:.3g}])"))
            parts[f"{b} {label}"] = {"verdict": verdict, "reason": reason}
            effects[f"{b} {label}"] = effect
    return parts, table, effects, units


def summarize(parts) -> tuple[str, str]:
    verdict = combine(p["verdict"] for p in parts.values())
    return verdict, "; ".join(f"{k}: {p['verdict']}" for k, p in parts.items())


def gap_figure(result, path):
    n = result.numbers
    groups = {f"{r} {nm}": v for nm, g in n["gap_to_dense"].items() for r, v in g.items()}
    return _plots.bars(path, title=f"{result.claim}: gap to dense by recipe and N:M — "
                       f"{result.verdict}", groups=groups, ylabel=f"gap to dense ({n['units']})",
                       hline=0.0, note=f"{result.problem}; seeds {list(result.seeds)}; bars: "
                       "mean and 95% t-CI over seeds, dots: seeds; STEP: AutoSwitch (clipped)")
