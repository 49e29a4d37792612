"""C6 (Fig. 5): STEP holds accuracy at high sparsity where the baselines degrade.

Quantity. The runs of C5 (the same RunSpecs, so they run once) at the problem's high
sparsity ratios: 1:8 and 1:16 on digits, 1:8 on the language model (PROTOCOL §7) and on
MNIST-1D.

Effect. Per reading, baseline B (ASP, SR-STE) and N:M: E = gap_B - gap_STEP (STEP's gap
to dense is smaller than B's); margin: the problem's.

Rule (PROTOCOL §5-7, registered before this evidence): premise per part gap_B > 0
(one-sided); the parts with their premise are decided by the generic rule with Holm over
every part of both readings; the claim is REPRODUCED if either reading is (the reason
names it), NOT REPRODUCED if both are. Draft 4: the plateau premise and the operating
points of C5.
"""

from __future__ import annotations

from stepsim.checks import gaps, outcome
from stepsim.checks.registry import Claim, register
from stepsim.checks.verdict import rule_of

#: the high ratios per problem: N/M <= 1/8 (MNIST-1D's 1:8; its 1:4 is C5's)
HIGH = {"digits": ((1, 8), (1, 16)), "lm": ((1, 8),), "mnist1d": ((1, 8),)}


def high_nms(budget) -> tuple:
    """The high ratios of the problem (an operating point restricted to one N:M keeps it
    if it is one of them)."""
    return tuple(nm for nm in HIGH[budget.problem]
                 if budget.nm_only is None or tuple(budget.nm_only) == nm)


def jobs(budget):
    return [r for group in gaps.runs(budget, high_nms(budget)).values() for r in group]


def part_names(budget) -> tuple:
    return gaps.part_names(budget, high_nms(budget))


def decide_claim(budget, results):
    nms = high_nms(budget)
    parts, readings, table = gaps.gap_parts(
        budget, results, nms, (1, -1, 0),
        lambda b, label, r: f"gap({b}) - gap(STEP-{r}) at {label}")
    numbers = {"gap_to_dense": table, "switches": gaps.switch_record(budget, results, nms)}
    return outcome.result(CLAIM, budget, parts, numbers, readings=readings)


def gather(budget, results):
    """Draft 5: the parts measured, decided with every reading of the claim."""
    return gaps.gap_gathered(CLAIM.id, budget, results, high_nms(budget), (1, -1, 0),
                             lambda b, label, r: f"gap({b}) - gap(STEP-{r}) at {label}")


def figure(result, path):
    return gaps.gap_figure(result, path)


CLAIM = register(Claim(
    id="C6",
    title="STEP holds accuracy at high sparsity where ASP and SR-STE degrade (Fig. 5)",
    rule=rule_of(__doc__), jobs=jobs, decide=decide_claim, parts=part_names,
    figure=figure, gather=gather))
