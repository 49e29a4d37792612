"""C8 (Fig. 8): freezing v in phase 2 beats updating it.

Quantity. Per evaluation seed, on the problem's first N:M, both readings of STEP
(PROTOCOL §5) at SR-STE's tuned learning rate, switched at a fixed step early
(0.4 T_w) or late (1.6 T_w): v frozen at the switch as raw v* (Algorithm 1), v frozen as
the bias-corrected v*, and v updated in phase 2 (``step-v-updated``); and dense.

Effect. Per reading, switch and v*: E = e(v updated) - e(v frozen), paired; margin: the
problem's.

Rule (PROTOCOL §6-7, registered before this evidence): premise per part: e(v updated) -
e(dense) > 0 (one-sided; freezing has something to fix); 8 parts decided by the generic
rule with Holm across all; the claim is REPRODUCED if either reading is.
"""

from __future__ import annotations

from stepsim.checks import outcome, plots
from stepsim.checks.budget import STEP_KEYS, effect
from stepsim.checks.registry import Claim, register
from stepsim.checks.verdict import Evidence, negated, rule_of

FROZEN = {"raw v*": "", "bias-corrected v*": "-bc"}


def _switches(budget) -> dict:
    return {f"{w:g} T_w": max(1, round(w * budget.window))
            for w in budget.rules.c8_switch_windows}


def _runs(budget):
    nm = budget.nms[0]
    out = {"dense": budget.runs("dense")}
    for r, key in STEP_KEYS.items():
        for when, k0 in _switches(budget).items():
            switch = ("fixed-step", {"k0": k0})
            out[(r, when, "updated")] = budget.runs(f"{key}-vupd", nm=nm, switch=switch)
            for label, suffix in FROZEN.items():
                out[(r, when, label)] = budget.runs(key + suffix, nm=nm, switch=switch)
    return out


def jobs(budget):
    return [j for group in _runs(budget).values() for j in group]


def _part_name(reading: str, frozen: str, when: str) -> str:
    return f"STEP-{reading} {frozen} at {when}"


def part_names(budget) -> tuple:
    """Per reading of STEP, switch step and frozen v*, one part."""
    return tuple(_part_name(r, label, when) for r in STEP_KEYS for when in _switches(budget)
                 for label in FROZEN)


def primary_parts(budget) -> tuple:
    """The parts the verdict rests on (PROTOCOL.md D5.5): raw v* at both switches; the
    bias-corrected v* parts are secondary."""
    return tuple(n for n in part_names(budget) if f" {next(iter(FROZEN))} " in n)


def _measured(budget, results):
    """(parts: name -> Evidence with its harm e(frozen) - e(updated), readings, numbers)."""
    runs = _runs(budget)
    todo, readings = {}, {r: [] for r in STEP_KEYS}
    for r in STEP_KEYS:
        for when in _switches(budget):
            updated = runs[(r, when, "updated")]
            premise = effect(results, [(1, updated), (-1, runs["dense"])],
                             name=f"e(v updated) - e(dense), STEP-{r} at {when}",
                             units=budget.units, margin=budget.margin)
            for label in FROZEN:
                name = _part_name(r, label, when)
                e = effect(results, [(1, updated), (-1, runs[(r, when, label)])],
                           name=f"e(v updated) - e(frozen {label}), STEP-{r} at {when}",
                           units=budget.units, margin=budget.margin)
                text = f"STEP-{r} with v updated (switch at {when}) has no gap to dense"
                harm = negated(e, f"e(frozen {label}) - e(v updated), STEP-{r} at {when}")
                todo[name] = Evidence(e, premise, text, harm=harm)
                readings[r].append(name)
    numbers = {"nm": list(budget.nms[0]), "switch_steps": _switches(budget)}
    return todo, readings, numbers


decide_claim, gather = outcome.from_measured(_measured, lambda: CLAIM)


CLAIM = register(Claim(
    id="C8",
    title="Freezing v in phase 2 beats updating it (Fig. 8)",
    rule=rule_of(__doc__), jobs=jobs, decide=decide_claim, parts=part_names,
    primary=primary_parts, figure=plots.parts_figure, gather=gather))
