"""What the gap claims (C5, C6) share: each recipe's runs, the parts per reading of STEP,
baseline and N:M, and the figure.

A part compares baseline B (ASP, SR-STE) with one reading of STEP (``budget.STEP_KEYS``:
Algorithm 1 "A1", STEP on SR-STE "SR") at one N:M: its effect is
sum_j c_j e_j over (B, STEP, dense) with the claim's coefficients, its premise
gap(B) = e(B) - e(dense) > 0 (one-sided, PROTOCOL §6). Holm runs over every part of the
claim, both readings together.

PROTOCOL.md "Draft 4": the budget names the operating point (STEP's lr reading, its
switch, the schedule, the readings run); a part whose STEP runs switched on the initial
plateau (any seed) is INCONCLUSIVE "switched on the plateau" (:func:`plateau_gate`).
"""

from __future__ import annotations

import dataclasses

from stepsim.checks import plots
from stepsim.checks.budget import causes, effect
from stepsim.checks.protocol import nm_label
from stepsim.checks.verdict import INCONCLUSIVE, Evidence, decide_parts

BASELINES = ("asp", "sr-ste")


def runs(budget, nms) -> dict:
    out = {("dense", None): budget.runs("dense")}
    for nm in nms:
        for r in (*BASELINES, *budget.step_keys.values()):
            out[(r, tuple(nm))] = budget.runs(r, nm=nm)
    return out


def part_name(reading: str, baseline: str, nm) -> str:
    return f"STEP-{reading} vs {baseline} {nm_label(nm)}"


def part_names(budget, nms) -> tuple:
    """Per N:M, baseline and reading of STEP the budget runs, one part."""
    return tuple(part_name(r, b, nm) for nm in nms for b in BASELINES for r in budget.step_keys)


def gap_evidence(budget, results, nms, coefficients, effect_name):
    """(parts: name -> Evidence, readings: reading of STEP -> part names, gap table,
    step_runs: part name -> STEP's runs). coefficients: (c_B, c_STEP, c_dense) of the
    effect; effect_name(b, label, reading) -> its name. Each part's harm quantity (draft
    5, PROTOCOL.md D5.4) is e(STEP) - e(B): STEP worse than the baseline it should
    improve."""
    groups = runs(budget, nms)
    dense = groups[("dense", None)]
    units, margin = budget.units, budget.margin
    steps = budget.step_keys
    todo, readings, table, step_runs = {}, {r: [] for r in steps}, {}, {}
    for nm in nms:
        label = nm_label(nm)
        table[label] = {r: effect(results, [(1, groups[(key, tuple(nm))]), (-1, dense)],
                                  name="gap", units=units, margin=margin).values
                        for r, key in [(b, b) for b in BASELINES]
                        + [(f"STEP-{r}", k) for r, k in steps.items()]}
        for b in BASELINES:
            base = groups[(b, tuple(nm))]
            premise = effect(results, [(1, base), (-1, dense)],
                             name=f"gap({b}) at {label}", units=units, margin=margin)
            for reading, key in steps.items():
                cb, cs, cd = coefficients
                step = groups[(key, tuple(nm))]
                e = effect(results, [(cb, base), (cs, step), (cd, dense)],
                           name=effect_name(b, label, reading), units=units, margin=margin)
                harm = effect(results, [(1, step), (-1, base)],
                              name=f"e(STEP-{reading}) - e({b}) at {label}", units=units,
                              margin=margin)
                name = part_name(reading, b, nm)
                todo[name] = Evidence(e, premise, f"{b}'s gap to dense at {label} is not "
                                      f"above 0", harm=harm)
                readings[reading].append(name)
                step_runs[name] = step
    return todo, readings, table, step_runs


def gap_parts(budget, results, nms, coefficients, effect_name):
    """(parts, readings, gap table): :func:`gap_evidence` decided by draft 4's rule, then
    the plateau gate."""
    todo, readings, table, step_runs = gap_evidence(budget, results, nms, coefficients,
                                                    effect_name)
    parts = plateau_gate(budget, results, decide_parts(todo), step_runs)
    return parts, readings, table


def gap_gathered(claim: str, budget, results, nms, coefficients, effect_name):
    """Draft 5: :func:`gap_evidence` as an ``outcome.Gathered``, with the plateau gate
    applied after the decision."""
    from stepsim.checks.outcome import Gathered

    todo, readings, table, step_runs = gap_evidence(budget, results, nms, coefficients,
                                                    effect_name)
    numbers = {"gap_to_dense": table, "switches": switch_record(budget, results, nms)}
    return Gathered(todo, numbers, readings,
                    lambda parts: plateau_gate(budget, results, parts, step_runs, claim))


def plateau_gate(budget, results, parts: dict, step_runs: dict, claim: str = "C5") -> dict:
    """PROTOCOL.md "Switch premises": a part whose STEP runs (``step_runs``: part name ->
    runs) switched on the initial plateau in any seed is INCONCLUSIVE, "switched on the
    plateau (j of n seeds)", whatever its interval says. Applies to the claims of
    ``plateau.claims``."""
    from stepsim.checks.operating import plateau_count

    if claim not in budget.rules.plateau.claims:
        return parts
    out = dict(parts)
    for name, group in step_runs.items():
        rows = causes(results, group, budget, clip=True)
        j, n = plateau_count(rows)
        if j:
            p = out[name]
            out[name] = dataclasses.replace(
                p, verdict=INCONCLUSIVE,
                reason=f"switched on the plateau ({j} of {n} seeds: the batch loss at k0 "
                f"above {budget.rules.plateau.max_ratio:g} x its start); "
                f"the interval alone said {p.verdict}")
    return out


def switch_record(budget, results, nms) -> dict:
    """reading -> N:M -> [{"k0", "fraction", "cause", "loss_ratio", "plateau"}] of every
    STEP run (clipped AutoSwitch, or "fixed" at the budget's fraction)."""
    return {r: {f"{nm[0]}:{nm[1]}": causes(results, budget.runs(k, nm=nm), budget, clip=True,
                                           fixed=budget.fraction is not None)
                for nm in nms} for r, k in budget.step_keys.items()}


def gap_figure(result, path):
    n = result.numbers
    groups = {f"{r} {nm}": v for nm, g in n["gap_to_dense"].items() for r, v in g.items()}
    return plots.bars(path, title=f"{result.claim}: gap to dense by recipe and N:M — "
                       f"{result.verdict}", groups=groups, ylabel=f"gap to dense ({n['units']})",
                       hline=0.0, note=f"{result.problem}; seeds {list(result.seeds)}; bars: "
                       "mean and 95% t-CI over seeds, dots: seeds; STEP: AutoSwitch (clipped)")
