"""C1 (Fig. 1): SR-STE's accuracy gap to dense is larger under Adam than under momentum SGD.

Quantity. Per seed s, on the budget's problem: the error e (``_setup.error_of``) of dense
and of SR-STE (the problem's N:M, lam = 2e-4), each trained with Adam (lr 1e-3) and with
momentum SGD (lr 0.05, momentum 0.9); gap_opt(s) = e(SR-STE, opt) - e(dense, opt).

Effect. gap_Adam(s) - gap_SGDM(s), paired over seeds, margin ``MARGIN[units]``.

Rule (fixed before any result was seen): ``verdict.decide`` on the effect, with
discriminates = "gap_Adam or gap_SGDM has a 95% CI excluding 0"; when SR-STE cannot be
told from dense under either optimizer the problem is too easy and the verdict is
INCONCLUSIVE.
"""

from __future__ import annotations

from stepsim.checks import _plots
from stepsim.checks._setup import MARGIN, errors
from stepsim.checks.verdict import ClaimResult, decide, paired_effect, rule_of, separated

CLAIM = "C1"
TITLE = "SR-STE's gap to dense is larger under Adam than under momentum SGD (Fig. 1)"
RULE = rule_of(__doc__)
OPTIMIZERS = {"adam": {"lr": 1e-3}, "sgdm": {"lr": 0.05, "momentum": 0.9}}


def _runs(budget):
    return {(recipe, opt): [budget.fit(recipe, s, optimizer=opt, **kw) for s in budget.seeds]
            for recipe in ("dense", "sr-ste") for opt, kw in OPTIMIZERS.items()}


def jobs(budget):
    return [job for group in _runs(budget).values() for job in group]


def decide_claim(budget, results) -> ClaimResult:
    runs = _runs(budget)
    e = {}
    for key, group in runs.items():
        e[key], units = errors(results, group)
    gap = {opt: [a - b for a, b in zip(e[("sr-ste", opt)], e[("dense", opt)])]
           for opt in OPTIMIZERS}
    effect = paired_effect(gap["adam"], gap["sgdm"], name="gap(Adam) - gap(SGD-M)", units=units,
                           margin=MARGIN[units])
    zeros = [0.0] * len(budget.seeds)
    disc = separated(gap["adam"], zeros) or separated(gap["sgdm"], zeros)
    verdict, reason = decide(effect, discriminates=disc, why_not=(
        "too easy: SR-STE's gap to dense is not distinguishable from 0 under either optimizer"))
    numbers = {"units": units, "error": {f"{r}/{o}": v for (r, o), v in e.items()},
               "gap": gap, "discriminates": disc}
    return ClaimResult(CLAIM, TITLE, verdict, reason, RULE, effect, budget.label,
                       tuple(budget.seeds), budget.mode, numbers)


def figure(result, path):
    n = result.numbers
    groups = {f"gap, {o}": v for o, v in n["gap"].items()}
    return _plots.bars(path, title=f"C1 (Fig. 1): SR-STE gap to dense by optimizer — "
                       f"{result.verdict}", groups=groups, ylabel=f"gap ({n['units']})",
                       hline=0.0, note=f"{result.problem}; seeds {list(result.seeds)}; bars: "
                       "mean and 95% t-CI over seeds, dots: seeds")
