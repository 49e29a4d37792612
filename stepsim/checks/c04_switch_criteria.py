"""C4 (Table 1): AutoSwitch picks a k0 with smaller later variance change than Eq. 10 and 11.

Quantity. Per seed s: a dense Adam profiling run (lr 1e-3, b2 0.999, eps 1e-8) on the
budget's problem, watched by each criterion — AutoSwitch (Algorithm 2, Option I on raw v,
full window, clipped to [0.1 T, 0.5 T] so that it always fires and 1000 later steps
exist), Agarwal et al. (Eq. 10) and Tang et al. (Eq. 11). Each criterion's switch step
k0 and its Table 1 score (1/1000) sum_{k=k0}^{k0+999} ||v_{k+1} - v_k||_1 (lower is
better) are recorded together: a later switch scores lower for free, so k0 is always
reported beside the score. The criterion only watches; training is the same run.

Effect. For X in {Eq. 10, Eq. 11}: ln score_X(s) - ln score_AutoSwitch(s), paired over
seeds, margin ln 1.1 (AutoSwitch at least 10% lower).

Rule (fixed before any result was seen): ``verdict.decide`` on each of the two effects,
combined by ``verdict.combine`` (REPRODUCED only if AutoSwitch beats both). Beside the
verdict, the question a user asks: each criterion's k0 when the loss is multiplied by
0.01, 1 and 100 (Adam's update is scale-free up to eps; v scales by the factor squared)
and when eps is 1e-6 instead of 1e-8. A criterion is reported as depending on the units
of the loss when, on any seed, its k0 at factor 0.01 or 100 differs from its k0 at factor
1 by more than max(2 steps, 5%).
"""

from __future__ import annotations

import math

import numpy as np

from stepsim.checks import _plots
from stepsim.checks.verdict import (
    INCONCLUSIVE,
    ClaimResult,
    combine,
    decide,
    paired_effect,
    rule_of,
)

CLAIM = "C4"
TITLE = "AutoSwitch's k0 has a smaller later variance change than Eq. 10 and Eq. 11 (Table 1)"
RULE = rule_of(__doc__)
CRITERIA = {"autoswitch": {"clip": True}, "agarwal": {}, "tang": {}}
FACTORS = (0.01, 1.0, 100.0)
EPS = (1e-8, 1e-6)


def _steps(budget):
    """Profiling runs are longer than the budget's: 2000 steps after its end (quick 3500,
    full 6000), so that a switch late in the run still has 1000 steps to be scored."""
    return budget.steps + 2000


def _job(budget, criterion, seed, factor=1.0, eps=1e-8):
    return budget.fit("dense", seed, steps=_steps(budget), criterion=criterion,
                      criterion_options=CRITERIA[criterion], loss_factor=factor,
                      optimizer="adam", lr=1e-3, eps=eps)


def _unit_seeds(budget):
    return budget.seeds[:1] if budget.mode == "quick" else budget.seeds


def jobs(budget):
    out = [_job(budget, c, s) for c in CRITERIA for s in budget.seeds]
    for c in CRITERIA:
        for s in _unit_seeds(budget):
            out += [_job(budget, c, s, factor=f) for f in FACTORS if f != 1.0]
            out += [_job(budget, c, s, eps=e) for e in EPS if e != 1e-8]
    return out


def decide_claim(budget, results) -> ClaimResult:
    t1 = {c: [results[_job(budget, c, s).digest]["table1"] for s in budget.seeds]
          for c in CRITERIA}
    parts, effects = {}, {}
    missing = [c for c, rows in t1.items() if any(r["score"] is None for r in rows)]
    if missing:  # a criterion that never fired (or fired too late to score) has no score
        numbers = {"table1": t1, "never_scored": missing, "steps": _steps(budget)}
        return ClaimResult(CLAIM, TITLE, INCONCLUSIVE, f"no Table 1 score for {missing} on "
                           "some seed (never fired, or no step after k0)", RULE, None,
                           budget.label, tuple(budget.seeds), budget.mode, numbers)
    for other in ("agarwal", "tang"):
        a = [math.log(x["score"]) for x in t1[other]]
        b = [math.log(x["score"]) for x in t1["autoswitch"]]
        effects[other] = paired_effect(a, b, name=f"ln score({other}) - ln score(autoswitch)",
                                       units="ln score", margin=math.log(1.1))
        parts[other] = decide(effects[other])
    verdict = combine(v for v, _ in parts.values())
    k0 = {c: [x["k0"] for x in t1[c]] for c in CRITERIA}
    reason = "; ".join(f"vs {o}: {v} ({effects[o].estimate:+.3g} [{effects[o].ci_low:.3g}, "
                       f"{effects[o].ci_high:.3g}])" for o, (v, _) in parts.items())
    reason += "; k0 " + ", ".join(f"{c} {int(np.median(v))}" for c, v in k0.items())
    units = {}
    for c in CRITERIA:
        rows = {}
        for s in _unit_seeds(budget):
            rows[s] = {f"x{f:g}": results[_job(budget, c, s, factor=f).digest]["table1"]["k0"]
                       for f in FACTORS}
            rows[s].update({f"eps={e:g}": results[_job(budget, c, s, eps=e).digest]["table1"]["k0"]
                            for e in EPS})
        moved = any(_moved(r["x1"], r[f"x{f:g}"]) for r in rows.values()
                    for f in FACTORS if f != 1.0)
        units[c] = {"k0": rows, "depends_on_loss_units": moved}
    dependent = [c for c, u in units.items() if u["depends_on_loss_units"]]
    reason += ("; k0 depends on the loss units for " + ", ".join(dependent) if dependent
               else "; no criterion's k0 depends on the loss units")
    numbers = {"table1": t1, "k0": k0, "parts": {o: v for o, (v, _) in parts.items()},
               "effects": effects, "units": units, "steps": _steps(budget),
               "score_curve": results[_job(budget, "autoswitch", budget.seeds[0]).digest][
                   "score_curve"]}
    problem = budget.label.replace(f"{budget.steps} steps", f"{_steps(budget)} steps")
    return ClaimResult(CLAIM, TITLE, verdict, reason, RULE, effects["tang"], problem,
                       tuple(budget.seeds), budget.mode, numbers)


def _moved(k_ref, k_other) -> bool:
    if k_ref is None or k_other is None:
        return k_ref != k_other
    return abs(k_other - k_ref) > max(2, 0.05 * k_ref)


def figures(result, out_dir):
    from pathlib import Path

    plt = _plots._pyplot()
    n = result.numbers
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8), dpi=90)
    curve = n["score_curve"]
    ax1.loglog(curve["k0"], curve["score"], "k-", lw=1,
               label=f"score of every k0 (seed {result.seeds[0]})")
    for i, (c, rows) in enumerate(n["table1"].items()):
        ax1.loglog([r["k0"] for r in rows], [r["score"] for r in rows], f"C{i}o", ms=5,
                   label=f"{c}: k0 median {int(np.median(n['k0'][c]))}")
    ax1.set_xlabel("switch step k0")
    ax1.set_ylabel("Table 1 score\n(mean ||v_{k+1}-v_k||_1, 1000 steps)")
    ax1.set_title("score beside k0 (a later k0 scores lower for free)", fontsize=9)
    ax1.legend(fontsize=6.5)
    labels = ["x0.01", "x1", "x100", "eps=1e-06"]
    x = np.arange(len(labels))
    for i, (c, u) in enumerate(n["units"].items()):
        for j, (seed, row) in enumerate(u["k0"].items()):
            ax2.plot(x + 0.08 * (i - 1), [row[k] if row[k] is not None else np.nan
                                           for k in labels], f"C{i}o-", ms=4, lw=0.8,
                     label=(f"{c}" + (" (depends on loss units)" if u["depends_on_loss_units"]
                                      else "")) if j == 0 else None)
    ax2.set_xticks(x, ["loss x0.01", "loss x1", "loss x100", "eps 1e-6"])
    ax2.set_yscale("log")
    ax2.set_ylabel("switch step k0")
    ax2.set_title("k0 when the loss units or eps change", fontsize=9)
    ax2.legend(fontsize=6.5)
    fig.suptitle(f"C4 (Table 1): switch criteria — {result.verdict}", fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    _plots.footer(fig, f"{result.problem}; seeds {list(result.seeds)} (dots: seeds); "
                  "AutoSwitch clipped to [0.1T, 0.5T]")
    return [_plots.save(fig, Path(out_dir) / "c4.png")]
