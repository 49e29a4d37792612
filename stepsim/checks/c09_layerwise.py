"""C9 (Table 4): layer-wise N:M with STEP beats layer-wise N:M alone — like for like.

Quantity. Per evaluation seed, on the problem at M in {8, 16} and 75% sparsity with the
DominoSearch allocation: layer-wise SR-STE (lambda 2e-4) at its tuned learning rate, and
layer-wise STEP at the same learning rate in both readings (PROTOCOL §5): STEP on SR-STE
(the same recipe plus the precondition phase and frozen v: the like-for-like comparison of
§7) and Algorithm 1 (no SR-STE term), each switched by AutoSwitch clipped to
[0.1 T, 0.5 T]; and dense.

Effect. Per reading and M: E = e(layer-wise SR-STE) - e(layer-wise STEP), paired; margin:
the problem's.

Rule (PROTOCOL §6-7, registered before this evidence): premise per M: layer-wise SR-STE's
gap to dense > 0 (one-sided); 4 parts decided by the generic rule with Holm across all;
the claim is REPRODUCED if either reading is. Draft 4 (§D4.5): a part whose STEP runs
switched on the initial plateau is INCONCLUSIVE.
"""

from __future__ import annotations

from stepsim.checks import gaps, outcome, plots, protocol
from stepsim.checks.budget import causes, effect
from stepsim.checks.registry import Claim, register
from stepsim.checks.verdict import Evidence, decide_parts, negated, rule_of

MS = protocol.RULES.layerwise.ms
STEPS = {"SR": "lw-step-sr", "A1": "lw-step-a1"}


def _runs(budget):
    out = {"dense": budget.runs("dense")}
    for m in MS:
        out[("lw-sr-ste", m)] = budget.runs("lw-sr-ste", m=m)
        for r, key in STEPS.items():
            out[(r, m)] = budget.runs(key, m=m)
    return out


def jobs(budget):
    return [j for group in _runs(budget).values() for j in group]


def _part_name(reading: str, m: int) -> str:
    return f"STEP-{reading} M={m}"


def part_names(budget) -> tuple:
    """Per layer-wise M, one part per reading of STEP ("STEP-SR M=8")."""
    return tuple(_part_name(r, m) for m in MS for r in STEPS)


def _measured(budget, results):
    """(parts: name -> Evidence with its harm e(STEP) - e(layer-wise SR-STE), readings,
    STEP's runs per part, numbers)."""
    runs = _runs(budget)
    todo, readings, switches = {}, {r: [] for r in STEPS}, {}
    for m in MS:
        base = runs[("lw-sr-ste", m)]
        premise = effect(results, [(1, base), (-1, runs["dense"])],
                         name=f"gap(layer-wise SR-STE) at M={m}", units=budget.units,
                         margin=budget.margin)
        for r in STEPS:
            name = _part_name(r, m)
            e = effect(results, [(1, base), (-1, runs[(r, m)])],
                       name=f"e(layer-wise SR-STE) - e(layer-wise STEP-{r}), M={m}",
                       units=budget.units, margin=budget.margin)
            harm = negated(e, f"e(layer-wise STEP-{r}) - e(layer-wise SR-STE), M={m}")
            todo[name] = Evidence(e, premise, f"layer-wise SR-STE at M={m} has no gap to dense",
                                  harm=harm)
            readings[r].append(name)
            switches[name] = causes(results, runs[(r, m)], budget, clip=True)
    step_runs = {_part_name(r, m): runs[(r, m)] for m in MS for r in STEPS}
    numbers = {"ms": list(MS), "target": budget.rules.layerwise.target,
               "switches": switches}
    return todo, readings, step_runs, numbers


def decide_claim(budget, results):
    todo, readings, step_runs, numbers = _measured(budget, results)
    parts = gaps.plateau_gate(budget, results, decide_parts(todo), step_runs, claim=CLAIM.id)
    return outcome.result(CLAIM, budget, parts, numbers, readings=readings)


def gather(budget, results):
    """Draft 5: the parts measured, decided with every reading of the claim; the plateau
    gate after the decision."""
    todo, readings, step_runs, numbers = _measured(budget, results)
    return outcome.Gathered(todo, numbers, readings, lambda parts: gaps.plateau_gate(
        budget, results, parts, step_runs, claim=CLAIM.id))


def figure(result, path):
    return plots.parts_figure(result, path)


CLAIM = register(Claim(
    id="C9",
    title="Layer-wise N:M with STEP beats layer-wise N:M alone (Table 4)",
    rule=rule_of(__doc__), jobs=jobs, decide=decide_claim, parts=part_names,
    figure=figure, gather=gather))
