"""C10 (Fig. 6): the decaying mask without its dense phase ends worse than with it.

Quantity. Per seed s, on the budget's problem with Adam (lr 1e-3): the decaying-mask
recipe (Kao et al.: N decreasing in equal frames to the target N:M, STE gradient) with
its dense phase (the first 10% of the run) and without it (dense_fraction = 0); the error
e of each, and of dense.

Effect. e(no dense phase, s) - e(with dense phase, s), paired, margin ``MARGIN[units]``.

Rule (fixed before any result was seen): ``verdict.decide`` with discriminates = "either
variant's gap to dense has a 95% CI above 0" (if both match dense, the problem is too
easy to tell them apart: INCONCLUSIVE).
"""

from __future__ import annotations

from stepsim.checks import _plots
from stepsim.checks._setup import MARGIN, errors, gaps
from stepsim.checks.verdict import ClaimResult, decide, effect_of, paired_effect, rule_of

CLAIM = "C10"
TITLE = "The decaying mask without its dense phase ends worse than with it (Fig. 6)"
RULE = rule_of(__doc__)
VARIANTS = {"with dense phase": 0.1, "no dense phase": 0.0}


def _job(budget, variant, s):
    if variant == "dense":
        return budget.fit("dense", s, optimizer="adam", lr=1e-3)
    return budget.fit("decaying-mask", s, dense_fraction=VARIANTS[variant], optimizer="adam",
                      lr=1e-3)


def jobs(budget):
    return [_job(budget, v, s) for v in ("dense", *VARIANTS) for s in budget.seeds]


def decide_claim(budget, results) -> ClaimResult:
    runs = {v: [_job(budget, v, s) for s in budget.seeds] for v in ("dense", *VARIANTS)}
    e = {}
    for v, js in runs.items():
        e[v], units = errors(results, js)
    effect = paired_effect(e["no dense phase"], e["with dense phase"],
                           name="e(no dense phase) - e(with dense phase)", units=units,
                           margin=MARGIN[units])
    disc = False
    for v in VARIANTS:
        g, _ = gaps(results, runs[v], runs["dense"])
        base = effect_of(g, name="gap", units=units, margin=MARGIN[units])
        disc = disc or (base.n >= 2 and base.ci_low > 0)
    verdict, reason = decide(effect, discriminates=disc, why_not=(
        "too easy: neither variant's gap to dense is above 0"))
    numbers = {"units": units, "error": e, "discriminates": disc}
    return ClaimResult(CLAIM, TITLE, verdict, reason, RULE, effect, budget.label,
                       tuple(budget.seeds), budget.mode, numbers)


def figure(result, path):
    n = result.numbers
    return _plots.bars(path, title=f"C10 (Fig. 6): decaying mask with/without dense phase — "
                       f"{result.verdict}", groups=n["error"], ylabel=f"error ({n['units']})",
                       note=f"{result.problem}; seeds {list(result.seeds)}; bars: mean and 95% "
                       "t-CI, dots: seeds")
