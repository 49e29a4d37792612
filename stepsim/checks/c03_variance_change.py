"""C3 (Fig. 3): the per-coordinate variance change d^-1 ||v_k - v_{k-1}||_1 falls below eps.

Quantity. Per seed s: one dense Adam run (lr 1e-3, eps 1e-8) on the budget's problem;
Z_k = ||v_k - v_{k-1}||_1 / d (AutoSwitch's Option I sample) and its smallest mean over a
window of T_w = floor(1/(1 - b2)) = 1000 consecutive steps (what AutoSwitch compares with
eps), min_mean(s). Value per seed: log10(eps / min_mean(s)), the decades by which the
windowed variance change gets below eps (negative: it never gets there).

Rule (fixed before any result was seen): ``verdict.decide`` on the mean of these values
over seeds with margin 0.1 decade: REPRODUCED if the CI's lower end is > 0 (below eps),
NOT REPRODUCED if its upper end is < 0.1. The step where it happens (as a fraction of the
run) is reported beside. (What eps is compared with depends on the units of the loss:
see C4.)
"""

from __future__ import annotations

import math

from stepsim.checks import _plots
from stepsim.checks.verdict import ClaimResult, decide, effect_of, rule_of

CLAIM = "C3"
TITLE = "The per-coordinate variance change ||v_k - v_{k-1}||_1 / d falls below eps (Fig. 3)"
RULE = rule_of(__doc__)
EPS = 1e-8


def _runs(budget):
    return [budget.fit("dense", s, optimizer="adam", lr=1e-3,
                       eps=EPS) for s in budget.seeds]


def jobs(budget):
    return _runs(budget)


def decide_claim(budget, results) -> ClaimResult:
    runs = [results[j.digest] for j in _runs(budget)]
    mins = [r["z_window"]["min_mean"] for r in runs]
    values = [math.log10(EPS / m) if m > 0 else math.inf for m in mins]
    finite = [v if math.isfinite(v) else 30.0 for v in values]  # Z = 0 exactly: far below
    effect = effect_of(finite, name="log10(eps / min windowed Z)", units="decades",
                       margin=0.1)
    verdict, reason = decide(effect)
    numbers = {"eps": EPS, "min_windowed_z": mins,
               "at_step": [r["z_window"]["at_step"] for r in runs], "steps": budget.steps,
               "window": runs[0]["z_window"]["window"],
               "z_curves": [{"step": r["v_curve"]["step"], "z": r["v_curve"]["z"]} for r in runs]}
    return ClaimResult(CLAIM, TITLE, verdict, reason, RULE, effect, budget.label,
                       tuple(budget.seeds), budget.mode, numbers)


def figure(result, path):
    plt = _plots._pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=90)
    for i, c in enumerate(result.numbers["z_curves"]):
        ax.loglog(c["step"], c["z"], color="C0", lw=0.8, alpha=0.7,
                  label="Z_k = ||v_k - v_{k-1}||_1 / d (one line per seed)" if i == 0 else None)
    for i, m in enumerate(result.numbers["min_windowed_z"]):
        ax.axhline(m, color="C1", lw=0.6, ls=":",
                   label=f"smallest {result.numbers['window']}-step mean" if i == 0 else None)
    ax.axhline(result.numbers["eps"], color="k", lw=1, ls="--", label="Adam's eps = 1e-8")
    ax.set_xlabel("step k")
    ax.set_ylabel("Z_k (squared-gradient units per step)")
    ax.set_title(f"C3 (Fig. 3): variance change vs eps, dense Adam — {result.verdict}",
                 fontsize=9)
    ax.legend(fontsize=7)
    return _plots.finish(fig, path, f"{result.problem}; seeds {list(result.seeds)}; "
                                    f"effect {result.effect}")
