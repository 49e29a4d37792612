"""C5 (Fig. 4, Tables 2-3): STEP closes most of the gap of ASP and SR-STE to dense.

Quantity. Per evaluation seed and N:M of the problem (PROTOCOL §1), each recipe at its
tuned learning rate (STEP reuses SR-STE's): the error e of dense, ASP (prune at 50%),
SR-STE (lambda 2e-4) and both readings of STEP (§5: Algorithm 1, and STEP on SR-STE),
switched by AutoSwitch clipped to [0.1 T, 0.5 T] (each run's switch step and cause are
reported); gap_X = e_X - e_dense.

Effect. Per reading, baseline B and N:M: E = gap_B - 2 gap_STEP, > 0 exactly when STEP's
gap is under half of B's ("closes most of the gap"); margin: the problem's.

Rule (PROTOCOL §5-7, registered before this evidence): premise per part gap_B > 0
(one-sided); the parts with their premise are decided by the generic rule with Holm over
every part of both readings; a reading is REPRODUCED when all its parts are; the claim is
REPRODUCED if either reading is (the reason names it), NOT REPRODUCED if both are.
Draft 4 (§D4): a part whose STEP runs switched on the initial plateau is INCONCLUSIVE;
the claim is also decided at STEP's own lr, at fixed switch fractions, under cosine with
warm-up and at every tied SR-STE lr (robust or fragile), each its own verdict line.
"""

from __future__ import annotations

from stepsim.checks import gaps, outcome
from stepsim.checks.registry import Claim, register
from stepsim.checks.verdict import rule_of


def nms(budget):
    agreement = budget.rules.extended.agreement or budget.rules.agreement
    if (budget.only == (CLAIM.id,) and budget.problem == agreement.problem
            and budget.mode == "full" and budget.timescale in agreement.timescales[1:]
            and not budget.tag and budget.schedule == "constant"):
        return (tuple(agreement.nm),)  # the fast-timescale agreement run
    return budget.nms  # (an operating point restricted to C5 keeps its own N:M)


def jobs(budget):
    return [r for group in gaps.runs(budget, nms(budget)).values() for r in group]


def part_names(budget) -> tuple:
    return gaps.part_names(budget, nms(budget))


def decide_claim(budget, results):
    parts, readings, table = gaps.gap_parts(
        budget, results, nms(budget), (1, -2, 1),
        lambda b, label, r: f"gap({b}) - 2 gap(STEP-{r}) at {label}")
    numbers = {"gap_to_dense": table, "switches": gaps.switch_record(budget, results, nms(budget))}
    return outcome.result(CLAIM, budget, parts, numbers, readings=readings)


def gather(budget, results):
    """Draft 5: the parts measured, decided with every reading of the claim."""
    return gaps.gap_gathered(CLAIM.id, budget, results, nms(budget), (1, -2, 1),
                             lambda b, label, r: f"gap({b}) - 2 gap(STEP-{r}) at {label}")


def figure(result, path):
    return gaps.gap_figure(result, path)


CLAIM = register(Claim(
    id="C5",
    title="STEP closes most of the gap of ASP and SR-STE to dense (Fig. 4, Tab. 2-3)",
    rule=rule_of(__doc__), jobs=jobs, decide=decide_claim, parts=part_names,
    figure=figure, gather=gather))
