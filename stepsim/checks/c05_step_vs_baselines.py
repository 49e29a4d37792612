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

from stepsim.checks._gaps import gap_figure, gap_jobs, gap_parts, summarize
from stepsim.checks._setup import MARGIN
from stepsim.checks.verdict import ClaimResult, paired_effect, rule_of

CLAIM = "C5"
TITLE = "STEP closes most of the gap of ASP and SR-STE to dense at 2:4 and 1:4 (Fig. 4, Tab. 2-3)"
RULE = rule_of(__doc__)
NMS = ((2, 4), (1, 4))
BASELINES = ("asp", "sr-ste")


def _effect(gap_b, gap_step, label, b, units):
    return paired_effect(gap_b, [2 * x for x in gap_step],
                         name=f"gap({b}) - 2 gap(STEP) at {label}", units=units,
                         margin=MARGIN[units])


def jobs(budget):
    return gap_jobs(budget, NMS, BASELINES)


def decide_claim(budget, results) -> ClaimResult:
    parts, table, effects, units = gap_parts(budget, results, NMS, BASELINES, _effect)
    verdict, reason = summarize(parts)
    first = next(iter(effects.values()))
    numbers = {"units": units, "gap_to_dense": table, "parts": parts, "effects": effects}
    return ClaimResult(CLAIM, TITLE, verdict, reason, RULE, first, budget.label,
                       tuple(budget.seeds), budget.mode, numbers)


def figure(result, path):
    return gap_figure(result, path)
