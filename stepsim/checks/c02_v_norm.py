"""C2 (Fig. 2): under SR-STE, ||v|| stays large late in training; under dense it decays.

Quantity. Per seed s: one Adam run of dense and one of SR-STE (lam = 2e-4) on the
budget's problem; from each run's ||v_k||_1 curve, the decay ratio
R = mean ||v||_1 over the last 10% of steps / max_k ||v_k||_1.

Effect. ln R(SR-STE, s) - ln R(dense, s), paired over seeds (how many e-folds less v
decays under SR-STE), margin ln 2 (SR-STE keeps at least twice dense's share of v).

Rule (fixed before any result was seen): ``verdict.decide`` on the effect; the second
half of the claim — dense's v decays — is a precondition: if dense's mean R is > 0.5
(v did not even halve) the problem does not show the regime of the claim and the verdict
is INCONCLUSIVE.
"""

from __future__ import annotations

import math

import numpy as np

from stepsim import _libm
from stepsim.checks import _plots
from stepsim.checks.verdict import ClaimResult, decide, paired_effect, rule_of

CLAIM = "C2"
TITLE = "Under SR-STE ||v|| stays large late in training; under dense Adam it decays (Fig. 2)"
RULE = rule_of(__doc__)
RECIPES = ("dense", "sr-ste")


def _runs(budget):
    return {r: [budget.fit(r, s, optimizer="adam", lr=1e-3)
                for s in budget.seeds] for r in RECIPES}


def jobs(budget):
    return [j for group in _runs(budget).values() for j in group]


def _decay_ratio(curve) -> float:
    steps = np.asarray(curve["step"])
    v = np.asarray(curve["v_l1"], dtype=float)
    late = v[steps >= 0.9 * steps[-1]]
    return float(late.mean() / v.max())


def decide_claim(budget, results) -> ClaimResult:
    runs = _runs(budget)
    ratio = {r: [_decay_ratio(results[j.digest]["v_curve"]) for j in group]
             for r, group in runs.items()}
    effect = paired_effect(_libm.log(ratio["sr-ste"]), _libm.log(ratio["dense"]),
                           name="ln R(SR-STE) - ln R(dense)", units="e-folds",
                           margin=math.log(2.0))
    dense_decays = float(np.mean(ratio["dense"])) <= 0.5
    verdict, reason = decide(effect, discriminates=dense_decays, why_not=(
        f"dense's v did not halve (mean R = {np.mean(ratio['dense']):.3g} > 0.5): the problem "
        "does not show the regime of the claim"))
    curves = {r: [results[j.digest]["v_curve"] for j in group] for r, group in runs.items()}
    numbers = {"decay_ratio": ratio, "dense_decays": dense_decays, "curves": curves}
    return ClaimResult(CLAIM, TITLE, verdict, reason, RULE, effect, budget.label,
                       tuple(budget.seeds), budget.mode, numbers)


def figure(result, path):
    plt = _plots._pyplot()
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
    return _plots.finish(fig, path, f"{result.problem}; one line per seed {list(result.seeds)}; "
                          f"effect {result.effect}")
