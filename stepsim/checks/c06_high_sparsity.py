"""C6 (Fig. 5): STEP holds accuracy to 1:16, while the baselines degrade from 1:8 on.

Quantity. Per seed s and N:M in {1:8, 1:16}, on the budget's problem with Adam: the
error of dense, STEP, ASP and SR-STE (as in C5); gap_X(s) = e_X(s) - e_dense(s).

Effect. For each baseline B in {ASP, SR-STE} and each N:M: gap_B(s) - gap_STEP(s), paired
over seeds (STEP degrades less than B), margin ``MARGIN[units]``.

Rule (fixed before any result was seen): ``verdict.decide`` on each of the 4 parts, with
discriminates = "gap_B has a 95% CI above 0" (a baseline that does not degrade leaves
nothing to hold: INCONCLUSIVE), combined by ``verdict.combine``.
"""

from __future__ import annotations

from stepsim.checks._gaps import gap_figure, gap_jobs, gap_parts, summarize
from stepsim.checks._setup import MARGIN
from stepsim.checks.c05_step_vs_baselines import BASELINES
from stepsim.checks.verdict import ClaimResult, paired_effect, rule_of

CLAIM = "C6"
TITLE = "STEP holds accuracy to 1:16; ASP and SR-STE degrade from 1:8 (Fig. 5)"
RULE = rule_of(__doc__)
NMS = ((1, 8), (1, 16))


def _effect(gap_b, gap_step, label, b, units):
    return paired_effect(gap_b, gap_step, name=f"gap({b}) - gap(STEP) at {label}", units=units,
                         margin=MARGIN[units])


def jobs(budget):
    return gap_jobs(budget, NMS, BASELINES)


def decide_claim(budget, results) -> ClaimResult:
    parts, table, effects, units = gap_parts(budget, results, NMS, BASELINES, _effect)
    verdict, reason = summarize(parts)
    numbers = {"units": units, "gap_to_dense": table, "parts": parts, "effects": effects}
    return ClaimResult(CLAIM, TITLE, verdict, reason, RULE, effects["sr-ste 1:16"],
                       budget.label, tuple(budget.seeds), budget.mode, numbers)


def figure(result, path):
    return gap_figure(result, path)
