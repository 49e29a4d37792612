"""C4 (Table 1): AutoSwitch picks a better switch step than Eq. 10 and 11 — judged by outcome.

Quantity. Per evaluation seed, on the problem's first N:M, both readings of STEP
(PROTOCOL §5) at SR-STE's tuned learning rate, switched by each criterion: AutoSwitch
(Algorithm 2, Option I, clipped to [0.1 T, 0.5 T] as the paper allows), Agarwal et al.
(Eq. 10, threshold 0.5 on the relative change of ||v||_2) and Tang et al. (Eq. 11,
threshold 0.96 on ||v_k||_1 / ||v_{k-T_w}||_1), with the training loss multiplied by
0.01, 1 and 100 (Adam's update is nearly unit-free, a criterion on v is not). Beside it,
each run's k0, its cause and the paper's Table-1 score at that k0 (``traces.table1``:
the score falls steadily as k0 grows, so it is not used to judge).

Effect. Per reading, criterion c in {Eq. 10, Eq. 11} and loss scale:
E = e(STEP switched by c) - e(STEP switched by AutoSwitch), paired; margin: the
problem's.

Rule (PROTOCOL §6-7, registered before this evidence): no premise beyond the runs
existing; 12 parts (2 readings x 2 criteria x 3 loss scales) decided by the generic rule
with Holm across all of them; the claim is REPRODUCED if either reading is (all its parts
REPRODUCED), NOT REPRODUCED if both are. Draft 4 (§D4.6): Eq. 10 switches at k0 = 2-4,
before 1/(1 - beta2), so its runs are made with raw and with bias-corrected v* and its
parts are decided with the bias-corrected ones (raw reported beside).
"""

from __future__ import annotations

from stepsim.checks import outcome, plots, protocol
from stepsim.checks.budget import STEP_KEYS, causes, effect
from stepsim.checks.registry import Claim, register
from stepsim.checks.verdict import Evidence, rule_of

CRITERIA = {"AutoSwitch": None, "Eq. 10": ("agarwal", {}), "Eq. 11": ("tang", {})}


#: PROTOCOL.md "v*": Eq. 10 switches at k0 = 2-4 < 1/(1 - beta2), where raw v* is biased
#: low by 1 - beta2^k0; its runs are made with both v*, its parts decided with:
EQ10_DECIDES = protocol.RULES.v_star.c4_eq10_decides


def _groups(budget):
    """(reading, criterion label, loss scale, recipe key, switch) of every group of runs."""
    scales = budget.rules.c4_loss_scales
    for r, key in STEP_KEYS.items():
        for c, switch in CRITERIA.items():
            for scale in scales:
                yield r, c, scale, key, switch
    if "bias-corrected" in budget.rules.v_star.c4_eq10:
        for r, key in STEP_KEYS.items():
            for scale in scales:
                yield r, "Eq. 10 bias-corrected v*", scale, key + "-bc", CRITERIA["Eq. 10"]


def _runs(budget):
    nm = budget.nms[0]
    return {(r, c, scale): budget.runs(key, nm=nm, switch=switch, loss_scale=scale)
            for r, c, scale, key, switch in _groups(budget)}


def _name(reading: str, criterion: str, scale: float) -> str:
    return f"STEP-{reading} {criterion} x{scale:g}"


def part_names(budget) -> tuple:
    """One part per reading of STEP, deciding criterion and loss scale."""
    return tuple(_name(r, c, scale) for r, c, scale, _, _ in _groups(budget) if _decides(c))


def _decides(c: str) -> bool:
    """Whether runs of criterion label ``c`` make a part (the others are reported)."""
    if c == "AutoSwitch":
        return False
    if c.startswith("Eq. 10"):
        return (c == "Eq. 10") == (EQ10_DECIDES == "raw")
    return True


def jobs(budget):
    return [j for group in _runs(budget).values() for j in group]


def _measured(budget, results):
    """(parts: name -> Evidence, readings: reading of STEP -> part names, numbers)."""
    runs = _runs(budget)
    todo, readings = {}, {r: [] for r in STEP_KEYS}
    for (r, c, scale), group in runs.items():
        if not _decides(c):
            continue
        name = _name(r, c, scale)
        e = effect(results, [(1, group), (-1, runs[(r, "AutoSwitch", scale)])],
                   name=f"e({c}) - e(AutoSwitch), STEP-{r}, loss x{scale:g}",
                   units=budget.units, margin=budget.margin)
        todo[name] = Evidence(e)
        readings[r].append(name)
    switches = {}
    for (r, c, scale), group in runs.items():
        rows = causes(results, group, budget, clip=(c == "AutoSwitch"))
        for row, j in zip(rows, group):
            row["table1_score"] = results[j.digest]["table1"]["score"]
        switches[_name(r, c, scale)] = rows
    errors = {_name(r, c, scale): [results[j.digest]["error"] for j in group]
              for (r, c, scale), group in runs.items()}
    numbers = {"nm": list(budget.nms[0]), "switches": switches, "errors": errors,
               "eq10_decided_with": EQ10_DECIDES}
    return todo, readings, numbers


decide_claim, gather = outcome.from_measured(_measured, lambda: CLAIM)


CLAIM = register(Claim(
    id="C4",
    title="AutoSwitch picks a better switch step than Eq. 10 and Eq. 11 (Table 1)",
    rule=rule_of(__doc__), jobs=jobs, decide=decide_claim, parts=part_names,
    figure=plots.parts_figure, gather=gather))
