"""C8 (Fig. 8): freezing v in phase 2 beats updating it.

Quantity. Per seed s, on the budget's problem with Adam (lr 1e-3, b2 0.999, so
1/(1 - b2) = 1000 steps): STEP with v frozen as Algorithm 1 does (raw v* = v_k0, no bias
correction), STEP with the bias-corrected v* = v_k0 / (1 - b2^k0), and STEP with v updated
in phase 2 (the paper's ablation), each switched at a fixed fraction of the run: an
*early* switch (0.2 T) and a *late* one (0.8 T). With the budgets' run lengths (quick
T = 1500, full T = 4000 on the regression) the early switch falls before 1/(1 - b2) steps
(k0 = 300 or 800), where the raw v* is still biased low by the factor 1 - b2^k0 (0.26 or
0.55), and the late one after it (k0 = 1200 or 3200: 0.70 or 0.96); the report states each
k0, k0 (1 - b2) and 1 - b2^k0.

Effect. e(updated, s) - e(frozen raw, s), paired, at each switch (the claim with the
paper's STEP), margin ``MARGIN[units]``. Beside it, the decomposition of the same gap:
e(frozen raw) - e(frozen bias-corrected) (the part due to the missing bias correction)
and e(frozen bias-corrected) - e(updated) (the part due to freezing itself), with CIs.

Rule (fixed before any result was seen): ``verdict.decide`` on the effect at the early and
at the late switch, combined by ``verdict.combine``.
"""

from __future__ import annotations

import math

from stepsim.checks import _plots
from stepsim.checks._setup import MARGIN, errors
from stepsim.checks.verdict import ClaimResult, combine, decide, paired_effect, rule_of

CLAIM = "C8"
TITLE = "Freezing v in phase 2 beats updating it (Fig. 8)"
RULE = rule_of(__doc__)
VARIANTS = {"frozen raw v*": {"recipe": "step"},
            "frozen bias-corrected v*": {"recipe": "step", "v_star": "bias-corrected"},
            "v updated": {"recipe": "step-v-updated"}}
SWITCHES = {"early": 0.2, "late": 0.8}
BETA2 = 0.999


def _job(budget, variant, when, s):
    options = dict(VARIANTS[variant])
    recipe = options.pop("recipe")
    return budget.fit(recipe, s, criterion="fixed-fraction",
                      criterion_options={"fraction": SWITCHES[when]}, optimizer="adam",
                      lr=1e-3, beta2=BETA2, **options)


def jobs(budget):
    return [_job(budget, v, w, s) for v in VARIANTS for w in SWITCHES for s in budget.seeds]


def decide_claim(budget, results) -> ClaimResult:
    parts, effects, decomposition, e_all, k0 = {}, {}, {}, {}, {}
    for when in SWITCHES:
        e = {}
        for v in VARIANTS:
            e[v], units = errors(results, [_job(budget, v, when, s) for s in budget.seeds])
        e_all[when] = e
        k0[when] = results[_job(budget, "frozen raw v*", when, budget.seeds[0]).digest][
            "switch_step"]
        margin = MARGIN[units]
        effects[when] = paired_effect(e["v updated"], e["frozen raw v*"],
                                      name=f"e(updated) - e(frozen raw) at the {when} switch",
                                      units=units, margin=margin)
        parts[when] = decide(effects[when])
        decomposition[when] = {
            "missing bias correction: e(raw) - e(bias-corrected)": paired_effect(
                e["frozen raw v*"], e["frozen bias-corrected v*"], name="bias correction",
                units=units, margin=margin),
            "freezing itself: e(bias-corrected) - e(updated)": paired_effect(
                e["frozen bias-corrected v*"], e["v updated"], name="freezing", units=units,
                margin=margin)}
    verdict = combine(v for v, _ in parts.values())
    where = {w: {"k0": k, "k0 * (1 - b2)": k * (1 - BETA2),
                 "raw v* bias factor 1 - b2^k0": 1 - math.pow(BETA2, k)}
             for w, k in k0.items()}
    reason = "; ".join(
        f"{w} switch (k0={k0[w]} {'<' if k0[w] < 1 / (1 - BETA2) else '>'} 1/(1-b2)): "
        f"{parts[w][0]} ({effects[w].estimate:+.3g} [{effects[w].ci_low:.3g}, "
        f"{effects[w].ci_high:.3g}])" for w in SWITCHES)
    numbers = {"units": units, "error": e_all, "parts": {w: p[0] for w, p in parts.items()},
               "effects": effects, "decomposition": decomposition, "switch": where}
    return ClaimResult(CLAIM, TITLE, verdict, reason, RULE, effects["early"], budget.label,
                       tuple(budget.seeds), budget.mode, numbers)


def figure(result, path):
    n = result.numbers
    groups = {f"{v}, {w} (k0={n['switch'][w]['k0']})": vals
              for w, e in n["error"].items() for v, vals in e.items()}
    return _plots.bars(path, title=f"C8 (Fig. 8): frozen vs updated v — {result.verdict}",
                       groups=groups, ylabel=f"error ({n['units']})",
                       note=f"{result.problem}; seeds {list(result.seeds)}; 1/(1-b2) = 1000 "
                       "steps; bars: mean and 95% t-CI, dots: seeds")
