"""C5 (Fig. 4, Tables 2-3): STEP closes most of the gap of ASP and SR-STE to dense (2:4, 1:4).

Quantity. Per seed s and N:M in {2:4, 1:4}, on the budget's problem with Adam (lr 1e-3):
the error e of dense, ASP (prune at 50%), SR-STE (lam 2e-4) and STEP (AutoSwitch clipped
to [0.1 T, 0.5 T], raw v* as Algorithm 1); gap_X(s) = e_X(s) - e_dense(s).

Effect. For each baseline B in {ASP, SR-STE} and each N:M: gap_B(s) - 2 gap_STEP(s),
paired over seeds: > 0 exactly when STEP's gap is less than half of B's ("closes most of
the gap"); margin ``MARGIN[units]``.

Rule (fixed before any result was seen): ``verdict.decide`` on each of the 4 parts, with
discriminates = "gap_B has a 95% CI above 0" (a part where the baseline has no gap to
close is INCONCLUSIVE: the problem is too easy to tell the recipes apart); the parts are
combined by ``verdict.combine``.
"""

from __future__ import annotations

from stepsim.checks import _plots
from stepsim.checks._setup import MARGIN, gaps
from stepsim.checks.verdict import ClaimResult, combine, decide, effect_of, paired_effect, rule_of

CLAIM = "C5"
TITLE = "STEP closes most of the gap of ASP and SR-STE to dense at 2:4 and 1:4 (Fig. 4, Tab. 2-3)"
RULE = rule_of(__doc__)
NMS = ((2, 4), (1, 4))
BASELINES = ("asp", "sr-ste")
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


def _effect(gap_b, gap_step, label, b, units):
    return paired_effect(gap_b, [2 * x for x in gap_step],
                         name=f"gap({b}) - 2 gap(STEP) at {label}", units=units,
                         margin=MARGIN[units])


def jobs(budget):
    return gap_jobs(budget, NMS, BASELINES)


def summarize(parts) -> tuple[str, str]:
    verdict = combine(p["verdict"] for p in parts.values())
    return verdict, "; ".join(f"{k}: {p['verdict']}" for k, p in parts.items())


def decide_claim(budget, results) -> ClaimResult:
    parts, table, effects, units = gap_parts(budget, results, NMS, BASELINES, _effect)
    verdict, reason = summarize(parts)
    first = next(iter(effects.values()))
    numbers = {"units": units, "gap_to_dense": table, "parts": parts, "effects": effects}
    return ClaimResult(CLAIM, TITLE, verdict, reason, RULE, first, budget.label,
                       tuple(budget.seeds), budget.mode, numbers)


def figure(result, path):
    n = result.numbers
    groups = {f"{r} {nm}": v for nm, g in n["gap_to_dense"].items() for r, v in g.items()}
    return _plots.bars(path, title=f"{result.claim}: gap to dense by recipe and N:M — "
                       f"{result.verdict}", groups=groups, ylabel=f"gap to dense ({n['units']})",
                       hline=0.0, note=f"{result.problem}; seeds {list(result.seeds)}; bars: "
                       "mean and 95% t-CI over seeds, dots: seeds; STEP: AutoSwitch (clipped)")
