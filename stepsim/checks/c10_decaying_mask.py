"""C10 (Fig. 6): the decaying mask without its dense phase ends worse than with it.

Quantity. Per evaluation seed and N:M of the problem: the error of the decaying-mask
recipe with a dense phase of 10% of the run and with none (dense_fraction 0), each at its
own tuned learning rate, and of dense.

Effect. Per N:M: E = e(no dense phase) - e(with dense phase), paired; margin: the
problem's.

Rule (PROTOCOL §6-7, registered before this evidence): premise per N:M: e(no dense phase)
- e(dense) > 0 (one-sided); the parts are decided by the generic rule with Holm across
them and combined by ``verdict.combine``.
"""

from __future__ import annotations

from stepsim.checks import outcome, plots
from stepsim.checks.budget import effect
from stepsim.checks.protocol import nm_label
from stepsim.checks.registry import Claim, register
from stepsim.checks.verdict import Evidence, decide_parts, negated, rule_of


def _runs(budget):
    out = {"dense": budget.runs("dense")}
    for nm in budget.nms:
        for key in ("decay-dense", "decay-nodense"):
            out[(key, nm)] = budget.runs(key, nm=nm)
    return out


def jobs(budget):
    return [j for group in _runs(budget).values() for j in group]


def part_names(budget) -> tuple:
    """One part per N:M of the budget ("1:8")."""
    return tuple(nm_label(nm) for nm in budget.nms)


def _measured(budget, results) -> dict:
    """N:M label -> Evidence, with its harm e(with dense phase) - e(no dense phase)."""
    runs = _runs(budget)
    todo = {}
    for nm in budget.nms:
        label = nm_label(nm)
        without = runs[("decay-nodense", nm)]
        premise = effect(results, [(1, without), (-1, runs["dense"])],
                         name=f"e(no dense phase) - e(dense) at {label}", units=budget.units,
                         margin=budget.margin)
        e = effect(results, [(1, without), (-1, runs[("decay-dense", nm)])],
                   name=f"e(no dense phase) - e(dense phase) at {label}", units=budget.units,
                   margin=budget.margin)
        todo[label] = Evidence(e, premise, f"no dense phase has no gap to dense at {label}",
                               harm=negated(e, f"e(dense phase) - e(no dense phase) at {label}"))
    return todo


def decide_claim(budget, results):
    return outcome.result(CLAIM, budget, decide_parts(_measured(budget, results)), {})


def gather(budget, results):
    """Draft 5: the parts measured, decided with every reading of the claim."""
    return outcome.Gathered(_measured(budget, results), {})


def figure(result, path):
    return plots.parts_figure(result, path)


CLAIM = register(Claim(
    id="C10",
    title="The decaying mask without its dense phase ends worse than with it (Fig. 6)",
    rule=rule_of(__doc__), jobs=jobs, decide=decide_claim, parts=part_names,
    figure=figure, gather=gather))
