"""C7 (Fig. 7): accuracy is flat for switch fractions in [10%, 80%]; AutoSwitch lands near 20%.

Quantity. Per seed s, on the budget's problem with Adam (lr 1e-3): STEP switched at a
fixed fraction f of the run, f in {0.1, 0.4, 0.8} (quick) or {0.1, 0.2, 0.4, 0.6, 0.8}
(full), and STEP with AutoSwitch (unclipped, Algorithm 2); the error e_f(s), and
AutoSwitch's k0 / T (1.0 when it never fired).

Effect. (a) flatness: range(s) = max_f e_f(s) - min_f e_f(s), the spread over fractions on
the same seed; (b) AutoSwitch's switch fraction.

Rule (fixed before any result was seen): (a) REPRODUCED if the 95% t-CI of the mean
range lies inside [0, 2 MARGIN[units]] (flat to within twice the smallest effect that
counts), NOT REPRODUCED if it lies entirely above, else INCONCLUSIVE; (b) "near 20%" means
in [0.1, 0.3]: REPRODUCED if the CI of the mean fraction lies inside, NOT REPRODUCED if it
lies entirely outside, else INCONCLUSIVE (``_setup.within``). Combined by
``verdict.combine``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from stepsim.checks import _plots
from stepsim.checks._setup import MARGIN, errors, within
from stepsim.checks.verdict import ClaimResult, combine, rule_of

CLAIM = "C7"
TITLE = "Accuracy is flat for switch fractions in [10%, 80%]; AutoSwitch lands near 20% (Fig. 7)"
RULE = rule_of(__doc__)
ADAM = {"optimizer": "adam", "lr": 1e-3}


def _fractions(budget):
    return (0.1, 0.4, 0.8) if budget.mode == "quick" else (0.1, 0.2, 0.4, 0.6, 0.8)


def _fixed(budget, f, s):
    return budget.fit("step", s, criterion="fixed-fraction", criterion_options={"fraction": f},
                      **ADAM)


def _auto(budget, s):
    return budget.fit("step", s, criterion="autoswitch", criterion_options={}, **ADAM)


def jobs(budget):
    return [_fixed(budget, f, s) for f in _fractions(budget) for s in budget.seeds] + [
        _auto(budget, s) for s in budget.seeds]


def decide_claim(budget, results) -> ClaimResult:
    e = {}
    for f in _fractions(budget):
        e[f], units = errors(results, [_fixed(budget, f, s) for s in budget.seeds])
    spread = [max(e[f][i] for f in e) - min(e[f][i] for f in e) for i in range(len(budget.seeds))]
    va, ra, flat = within(spread, 0.0, 2 * MARGIN[units])
    k0 = [results[_auto(budget, s).digest]["switch_step"] for s in budget.seeds]
    frac = [1.0 if k is None else k / budget.steps for k in k0]
    vb, rb, _ = within(frac, 0.1, 0.3)
    e_auto, _ = errors(results, [_auto(budget, s) for s in budget.seeds])
    verdict = combine([va, vb])
    reason = f"flat: {va} (range {ra}); AutoSwitch fraction {np.mean(frac):.2f}: {vb} ({rb})"
    flat = dataclasses.replace(flat, name="range of error over switch fractions", units=units,
                               margin=2 * MARGIN[units])
    numbers = {"units": units, "error_by_fraction": {str(f): v for f, v in e.items()},
               "range": spread, "autoswitch_k0": k0, "autoswitch_fraction": frac,
               "autoswitch_error": e_auto, "parts": {"flat": va, "near_20_percent": vb}}
    return ClaimResult(CLAIM, TITLE, verdict, reason, RULE, flat, budget.label,
                       tuple(budget.seeds), budget.mode, numbers)


def figure(result, path):
    plt = _plots._pyplot()
    n = result.numbers
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=90)
    fr = [float(f) for f in n["error_by_fraction"]]
    stats = [_plots.t_interval(v) for v in n["error_by_fraction"].values()]
    mean = [s[0] for s in stats]
    ax.errorbar(fr, mean, yerr=[[m - s[1] for m, s in zip(mean, stats)],
                                [s[2] - m for m, s in zip(mean, stats)]], fmt="C0o-",
                capsize=3, label="STEP, fixed switch fraction (mean, 95% CI)")
    ax.plot(n["autoswitch_fraction"], n["autoswitch_error"], "C3*", ms=9,
            label="STEP + AutoSwitch (one star per seed)")
    ax.axvspan(0.1, 0.3, color="C3", alpha=0.08, label="'near 20%': [0.1, 0.3]")
    ax.set_xlabel("switch step k0 / T")
    ax.set_ylabel(f"error ({n['units']})")
    ax.set_title(f"C7 (Fig. 7): error vs switch fraction — {result.verdict}", fontsize=9)
    ax.legend(fontsize=6.5)
    return _plots.finish(fig, path, f"{result.problem}; seeds {list(result.seeds)}")
