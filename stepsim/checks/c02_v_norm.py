"""C2 (Fig. 2): under SR-STE Adam's second moment v stays large late; under dense it decays.

Quantity. Per evaluation seed and N:M, the runs of C1/C5 under Adam at their tuned
learning rates: R = mean ||v||_1 over the last 10% of the steps / its peak over the run
(``traces.v_late_ratio``, at every step), for dense and for SR-STE.

Effect. Reported apart (PROTOCOL §7): the **direction** E = ln R(SR-STE) - ln R(dense),
margin 0 (one part per N:M); the **size** against the paper's figure: E >= ln 2 (v at
least twice as large late, relative to its peak), reached when the CI's lower end is
>= ln 2 — reported, not part of the verdict. A trace quantity: no test-set error.

Rule (PROTOCOL §6-7, registered before this evidence): premise R(dense) < 0.5 (the
one-sided upper bound of the mean); the direction parts are decided with margin 0 (lower
end > 0: REPRODUCED; upper end < 0: NOT REPRODUCED) with Holm across the N:M parts.
"""

from __future__ import annotations

import math

from stepsim._ground import libm as _libm
from stepsim.checks import outcome, plots
from stepsim.checks.protocol import nm_label
from stepsim.checks.registry import Claim, register
from stepsim.checks.verdict import Evidence, decide_parts, effect_from, rule_of


def _runs(budget):
    out = {("dense", None): budget.runs("dense")}
    for nm in budget.nms:
        out[("sr-ste", nm)] = budget.runs("sr-ste", nm=nm)
    return out


def jobs(budget):
    return [j for group in _runs(budget).values() for j in group]


def part_names(budget) -> tuple:
    """One part per N:M of the budget ("1:8")."""
    return tuple(nm_label(nm) for nm in budget.nms)


def _measured(budget, results):
    """(parts: N:M label -> Evidence, or a Part when a run diverged; size: label -> the
    size row; numbers)."""
    runs = _runs(budget)
    ratio = {k: [results[j.digest]["v_late_ratio"] for j in group] for k, group in runs.items()}
    dense = ratio[("dense", None)]
    broken = outcome.diverged(results, runs[("dense", None)])
    parts, size = {}, {}
    for nm in budget.nms:
        label = nm_label(nm)
        lost = broken + outcome.diverged(results, runs[("sr-ste", nm)])
        if lost:  # a diverged run has no v to read
            parts[label] = outcome.lost(label, f"{lost} run(s) have no v to read",
                                       units="e-folds", margin=0.0)
            continue
        premise = effect_from([0.5 - r for r in dense], name="0.5 - R(dense)", units="ratio",
                              margin=0.0)
        values = [a - b for a, b in zip(_libm.log(ratio[("sr-ste", nm)]), _libm.log(dense))]
        e = effect_from(values, name=f"ln R(SR-STE) - ln R(dense) at {label}", units="e-folds",
                        margin=0.0)
        parts[label] = Evidence(e, premise, "dense's v does not decay (R(dense) not below 0.5)")
        size[label] = {"estimate": e.estimate, "ln2": math.log(2.0)}
    curves = {k[0] if k[1] is None else f"{k[0]} {k[1][0]}:{k[1][1]}":
              [results[j.digest]["v_curve"] for j in group] for k, group in runs.items()}
    numbers = {"ratio": {("dense" if k[1] is None else f"sr-ste {k[1][0]}:{k[1][1]}"): v
                         for k, v in ratio.items()}, "size": size, "curves": curves}
    return parts, size, numbers


def decide_claim(budget, results):
    measured, size, numbers = _measured(budget, results)
    parts = {k: v for k, v in measured.items() if not isinstance(v, Evidence)}
    parts.update(decide_parts({k: v for k, v in measured.items() if isinstance(v, Evidence)}))
    parts = {name: parts[name] for name in part_names(budget)}
    for label, row in size.items():
        row["reached"] = bool(parts[label].effect.ci_low >= math.log(2.0))
    return outcome.result(CLAIM, budget, parts, numbers)


def gather(budget, results):
    """Draft 5: the direction parts measured (the size is reported: reached when the
    effect's 95% interval's lower end is >= ln 2)."""
    parts, size, numbers = _measured(budget, results)
    for label, row in size.items():
        row["reached"] = bool(parts[label].effect.ci_low >= math.log(2.0))
    return outcome.Gathered(parts, numbers)


def figure(result, path):
    plt = plots.pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=90)
    for i, (recipe, curves) in enumerate(result.numbers["curves"].items()):
        for j, c in enumerate(curves):
            ax.loglog(c["step"], c["v_l1"], color=f"C{i}", lw=0.9, alpha=0.7,
                      label=recipe if j == 0 else None)
    ax.set_xlabel("step k")
    ax.set_ylabel("||v_k||_1 (squared gradient units)")
    ax.set_title(f"C2 (Fig. 2): Adam's second moment, dense vs SR-STE — {result.verdict}",
                 fontsize=9)
    ax.legend(fontsize=7)
    return plots.finish(fig, path, f"{result.problem}; one line per seed {list(result.seeds)}; "
                          f"effect {result.effect}")


CLAIM = register(Claim(
    id="C2",
    title="Under SR-STE, Adam's v stays large late; under dense it decays (Fig. 2)",
    rule=rule_of(__doc__), jobs=jobs, decide=decide_claim, parts=part_names,
    figure=figure, gather=gather))
