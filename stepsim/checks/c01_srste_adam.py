"""C1 (Fig. 1): SR-STE's gap to dense is larger under Adam than under momentum SGD.

Quantity. Per evaluation seed and N:M of the problem (PROTOCOL §1), each run at its
learning rate tuned on the tuning seeds (§3): the error e of dense and of SR-STE
(lambda 2e-4) under Adam and under momentum SGD (momentum 0.9);
gap_o = e(SR-STE, o) - e(dense, o).

Effect. E = gap_Adam - gap_SGDM per seed (paired), one part per N:M; the CI includes the
test set's sampling error (§6); margin: the problem's.

Rule (PROTOCOL §6-7, registered before this evidence): premise, per part: SR-STE has a
gap to dense under at least one tuned optimizer (either gap's one-sided lower bound at
alpha/2 > 0: Bonferroni over the two) and both dense runs have converged (their mean
error moves by less than margin / 2 between 0.8 T and T); absent -> INCONCLUSIVE. The
parts with their premise are decided by the generic rule with Holm across parts
(``verdict.decide_parts``) and combined by ``verdict.combine``.
"""

from __future__ import annotations

from stepsim.checks import outcome, plots
from stepsim.checks.budget import effect
from stepsim.checks.protocol import nm_label
from stepsim.checks.registry import Claim, register
from stepsim.checks.verdict import Evidence, decide_parts, negated, premise_present, rule_of

OPTIMIZERS = ("adam", "sgdm")


def _runs(budget):
    out = {}
    for opt in OPTIMIZERS:
        out[("dense", opt, None)] = budget.runs("dense", optimizer=opt)
        for nm in budget.nms:
            out[("sr-ste", opt, nm)] = budget.runs("sr-ste", optimizer=opt, nm=nm)
    return out


def jobs(budget):
    return [r for group in _runs(budget).values() for r in group]


def part_names(budget) -> tuple:
    """One part per N:M of the budget ("1:8")."""
    return tuple(nm_label(nm) for nm in budget.nms)


def curve_errors(results, runs) -> dict:
    """step -> mean error over the runs' learning curves (the problem's error units)."""
    steps = results[runs[0].digest]["curves"]["step"]
    out = {}
    for j, step in enumerate(steps):
        values = [curve_error(results[r.digest]["curves"], j) for r in runs]
        out[int(step)] = sum(values) / len(values)
    return out


def curve_error(curves: dict, j: int) -> float:
    """The error at learning-curve point j in the problem's units: digits' test error from
    its accuracy, mnist1d's test error (points), the LM's gap."""
    if "test_accuracy" in curves:
        return 100.0 * (1.0 - curves["test_accuracy"][j])
    if "test_error" in curves:
        return curves["test_error"][j]
    return curves["gap"][j]


def converged(results, runs, budget) -> tuple[bool, float]:
    """(converged, |mean error at T - at 0.8 T|) of a dense configuration; a configuration
    with a diverged run has not converged (move: inf)."""
    import math

    if any(results[r.digest].get("diverged") for r in runs):
        return False, math.inf
    curve = curve_errors(results, runs)
    late = max(curve)
    early = min(curve, key=lambda s: abs(s - 0.8 * late))
    move = abs(curve[late] - curve[early])
    return move < budget.margin / 2, move


def _measured(budget, results):
    """Per N:M label: (E, the two gaps by optimizer, the optimizers whose dense runs have
    not converged); and the numbers."""
    runs = _runs(budget)
    units, margin = budget.units, budget.margin
    moves = {opt: converged(results, runs[("dense", opt, None)], budget) for opt in OPTIMIZERS}
    not_converged = [o for o, (ok, _) in moves.items() if not ok]
    per, gaps = {}, {}
    for nm in budget.nms:
        label = nm_label(nm)
        gap = {opt: effect(results, [(1, runs[("sr-ste", opt, nm)]),
                                     (-1, runs[("dense", opt, None)])],
                           name=f"gap(SR-STE, {opt}) at {label}", units=units, margin=margin)
               for opt in OPTIMIZERS}
        gaps[label] = {opt: g.values for opt, g in gap.items()}
        terms = [(1, runs[("sr-ste", "adam", nm)]), (-1, runs[("dense", "adam", None)]),
                 (-1, runs[("sr-ste", "sgdm", nm)]), (1, runs[("dense", "sgdm", None)])]
        e = effect(results, terms,
                   name=f"gap(Adam) - gap(SGD-M) at {label}", units=units, margin=margin)
        per[label] = (e, gap)
    numbers = {"gap": gaps, "dense_moved_late": {o: m for o, (_, m) in moves.items()}}
    return per, not_converged, moves, numbers


def _not_converged_text(not_converged, moves) -> str:
    return "dense not converged under " + ", ".join(
        f"{o} (moved {moves[o][1]:.3g} between 0.8 T and T)" for o in not_converged)


def decide_claim(budget, results):
    per, not_converged, moves, numbers = _measured(budget, results)
    units = budget.units
    todo, parts = {}, {}
    for label, (e, gap) in per.items():
        has_gap = any(premise_present(g, alpha=0.025) for g in gap.values())
        if not has_gap:
            parts[label] = outcome.absent(label, e, "SR-STE's gap to dense is not above 0 under "
                                         "either tuned optimizer (" + ", ".join(
                                             f"{o} {g.estimate:.3g}" for o, g in gap.items())
                                         + f" {units})")
        elif not_converged:
            parts[label] = outcome.absent(label, e, _not_converged_text(not_converged, moves))
        else:
            todo[label] = Evidence(e)
    parts.update(decide_parts(todo))
    parts = {name: parts[name] for name in part_names(budget)}
    return outcome.result(CLAIM, budget, parts, numbers)


def gather(budget, results):
    """Draft 5: per N:M, E with its premise (SR-STE's gap to dense under some tuned
    optimizer beyond the margin: either gap at alpha / 2) and its harm Gap_SGDM - Gap_Adam
    (PROTOCOL.md D5.4); dense not converged is a premise the statistics cannot test."""
    per, not_converged, moves, numbers = _measured(budget, results)
    gate = _not_converged_text(not_converged, moves) if not_converged else ""
    parts = {label: Evidence(e, tuple(gap.values()),
                             "SR-STE's gap to dense under some tuned optimizer",
                             harm=negated(e, f"gap(SGD-M) - gap(Adam) at {label}"), gate=gate)
             for label, (e, gap) in per.items()}
    return outcome.Gathered(parts, numbers)


def figure(result, path):
    n = result.numbers
    groups = {f"gap {o}, {nm}": v for nm, g in n["gap"].items() for o, v in g.items()}
    return plots.bars(path, title=f"C1 (Fig. 1): SR-STE gap to dense by optimizer — "
                       f"{result.verdict}", groups=groups, ylabel=f"gap ({n['units']})",
                       hline=0.0, note=f"{result.problem}; seeds {list(result.seeds)}; bars: "
                       "mean and 95% t-CI over seeds, dots: seeds; tuned lrs")


CLAIM = register(Claim(
    id="C1",
    title="SR-STE's gap to dense is larger under Adam than under momentum SGD (Fig. 1)",
    rule=rule_of(__doc__), jobs=jobs, decide=decide_claim, parts=part_names,
    figure=figure, gather=gather))
