"""C9 (Table 4): layer-wise N:M (DominoSearch-style) + STEP beats layer-wise alone at mixed N:M.

Quantity. Per seed s, on the budget's problem with Adam (lr 1e-3): layer-wise N:M at a
target sparsity of 75% with M = 8 and with M = 16 (each layer's N a power of two, chosen
by the recipes' default layer-wise rule — DominoSearch's dynamic N since the recipe core of
issue 11, the one-shot greedy allocation before it; M = 32 does not tile the regression's
16-wide layer and is left out; on a problem whose layers it tiles, M = 32 is run too),
trained with SR-STE (layer-wise alone) and with STEP
(AutoSwitch clipped); the error e of each, and of dense.

Effect. e(layer-wise SR-STE, s) - e(layer-wise STEP, s), paired, per M, margin
``MARGIN[units]``.

Rule (fixed before any result was seen): ``verdict.decide`` per M with discriminates =
"layer-wise SR-STE's gap to dense has a 95% CI above 0" (nothing to beat otherwise:
INCONCLUSIVE), combined by ``verdict.combine``.
"""

from __future__ import annotations

import numpy as np

from stepsim.checks import _plots
from stepsim.checks._setup import MARGIN, errors, gaps
from stepsim.checks.verdict import ClaimResult, combine, decide, effect_of, paired_effect, rule_of

CLAIM = "C9"
TITLE = "Layer-wise N:M + STEP beats layer-wise N:M alone at mixed N:8 / 16 / 32 (Table 4)"
RULE = rule_of(__doc__)
MS = (8, 16, 32)
TARGET = 0.75
ADAM = {"optimizer": "adam", "lr": 1e-3}


def _ms(budget) -> tuple:
    """The M of MS that tile every sparse layer of the budget's problem (grouping axis)."""
    from stepsim.problems.registry import make_problem

    problem = make_problem(budget.problem, **budget.problem_options)
    params = problem.init_params(np.random.default_rng(0))
    sparse = [params[name].shape[spec.axis] for name, spec in problem.specs.items()
              if spec.sparse]
    return tuple(m for m in MS if all(size % m == 0 for size in sparse))


def _job(budget, recipe, m, s):
    if recipe == "dense":
        return budget.fit("dense", s, **ADAM)
    kw = {"layerwise_target": TARGET, "layerwise_m": m, **ADAM}
    if recipe == "layerwise-step":
        return budget.fit(recipe, s, criterion="autoswitch", criterion_options={"clip": True},
                          **kw)
    return budget.fit(recipe, s, **kw)


def jobs(budget):
    out = [_job(budget, "dense", None, s) for s in budget.seeds]
    for m in _ms(budget):
        out += [_job(budget, r, m, s) for r in ("layerwise-sr-ste", "layerwise-step")
                for s in budget.seeds]
    return out


def decide_claim(budget, results) -> ClaimResult:
    dense = [_job(budget, "dense", None, s) for s in budget.seeds]
    parts, effects, table, nm = {}, {}, {}, {}
    ms = _ms(budget)
    for m in ms:
        e = {}
        for r in ("layerwise-sr-ste", "layerwise-step"):
            e[r], units = errors(results, [_job(budget, r, m, s) for s in budget.seeds])
            nm[f"{r} M={m}"] = results[_job(budget, r, m, budget.seeds[0]).digest]["nm"]
        table[f"M={m}"] = e
        g, _ = gaps(results, [_job(budget, "layerwise-sr-ste", m, s) for s in budget.seeds],
                    dense)
        base = effect_of(g, name="gap", units=units, margin=MARGIN[units])
        effects[f"M={m}"] = paired_effect(e["layerwise-sr-ste"], e["layerwise-step"],
                                          name=f"e(layer-wise SR-STE) - e(layer-wise STEP), M={m}",
                                          units=units, margin=MARGIN[units])
        parts[f"M={m}"] = decide(effects[f"M={m}"], discriminates=base.ci_low > 0, why_not=(
            f"too easy: layer-wise SR-STE's gap to dense at M={m} is not above 0"))
    verdict = combine(v for v, _ in parts.values())
    reason = "; ".join(f"{k}: {v} ({r})" for k, (v, r) in parts.items())
    dense_e, _ = errors(results, dense)
    numbers = {"units": units, "error": table, "dense_error": dense_e, "allocation_seed0": nm,
               "parts": {k: v for k, (v, _) in parts.items()}, "effects": effects,
               "target_sparsity": TARGET}
    return ClaimResult(CLAIM, TITLE, verdict, reason, RULE, effects[f"M={ms[0]}"],
                       budget.label, tuple(budget.seeds), budget.mode, numbers)


def figure(result, path):
    n = result.numbers
    groups = {"dense": n["dense_error"]}
    groups.update({f"{r} {m}": v for m, e in n["error"].items() for r, v in e.items()})
    return _plots.bars(path, title=f"C9 (Table 4): layer-wise N:M, SR-STE vs STEP — "
                       f"{result.verdict}", groups=groups, ylabel=f"error ({n['units']})",
                       note=f"{result.problem}; target sparsity {n['target_sparsity']}; seeds "
                       f"{list(result.seeds)}; bars: mean and 95% t-CI, dots: seeds")
