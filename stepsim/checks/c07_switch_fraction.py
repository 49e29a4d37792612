"""C7 (Fig. 7): final error is flat in the switch fraction in [10%, 80%]; AutoSwitch lands at ~20%.

Quantity. Per evaluation seed, on the problem's first N:M, both readings of STEP
(PROTOCOL §5) at SR-STE's tuned learning rate: (a) switched at a fixed fraction f of the
run, f in {0.1, 0.2, 0.4, 0.6, 0.8}; (b) switched by AutoSwitch *unclipped* (Algorithm 2),
at loss x1 and x0.01: its switch fraction k0 / T (1.0 when it never fires) and its cause
(``_setup.switch_cause``: "fired", "window" = the first step its window allows, "never").

Effect. (a) flatness, per reading and fraction: the deviation e_f - mean over fractions
of e, paired per seed (with the test set's sampling error); margin +-0.5 points /
+-0.02 nats. (b) landing, per reading and loss scale: the mean switch fraction.

Rule (PROTOCOL §6-7, registered before this evidence): (a) TOST equivalence with Holm over
the 10 parts (``verdict.decide_equivalence``): REPRODUCED if every fraction is equivalent
to the mean, NOT REPRODUCED if any fraction's interval lies outside the margin; (b) per
reading and scale: REPRODUCED if the 95% t-CI of the mean fraction lies inside [0.1, 0.3]
and the cause is "fired" in at least 6 of 8 seeds (75%), NOT REPRODUCED if the CI lies
outside [0.1, 0.3] or fewer than 75% fired, else INCONCLUSIVE. Per reading (a) and (b) are
combined by ``verdict.combine``; the claim is REPRODUCED if either reading is.
"""

from __future__ import annotations

import sys

from stepsim import stats
from stepsim.checks import _parts, _plots, protocol
from stepsim.checks._setup import STEP_KEYS, causes, combination
from stepsim.checks.verdict import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Part,
    decide_equivalence,
    effect_from,
    rule_of,
)

CLAIM = "C7"
TITLE = "Final error is flat for switch fractions in [10%, 80%]; AutoSwitch lands near 20% (Fig. 7)"
RULE = rule_of(__doc__)
FRACTIONS = tuple(protocol.RULES["c7_fractions"])
LANDING = protocol.RULES["c7_landing"]


def _fixed(budget, key, f):
    return budget.runs(key, nm=budget.nms[0], switch=("fixed-fraction", {"fraction": f}))


def _auto(budget, key, scale):
    return budget.runs(key, nm=budget.nms[0], switch=("autoswitch", {}), loss_scale=scale)


def jobs(budget):
    out = []
    for key in STEP_KEYS.values():
        for f in FRACTIONS:
            out += _fixed(budget, key, f)
        for scale in LANDING["loss_scales"]:
            out += _auto(budget, key, scale)
    return out


def _landing(name, rows) -> Part:
    lo, hi = LANDING["interval"]
    fractions = [1.0 if r["fraction"] is None else r["fraction"] for r in rows]
    fired = sum(r["cause"] == "fired" for r in rows) / len(rows)
    est = stats.mean_ci(fractions)
    e = effect_from(fractions, name=f"{name}: mean switch fraction", units="fraction of T",
                    margin=0.0)
    if fired < LANDING["fired_at_least"] or est.high < lo or est.low > hi:
        verdict = NOT_REPRODUCED
    elif lo <= est.low and est.high <= hi:
        verdict = REPRODUCED
    else:
        verdict = INCONCLUSIVE
    reason = (f"mean fraction {est.mean:.3g} [{est.low:.3g}, {est.high:.3g}] vs [{lo:g}, {hi:g}]; "
              f"fired (not window/never) in {fired:.0%} of seeds (need "
              f"{LANDING['fired_at_least']:.0%})")
    return Part(name=name, effect=e, verdict=verdict, reason=reason, level=0.95)


def decide_claim(budget, results):
    k = len(FRACTIONS)
    flat, readings, errors_by = {}, {r: [] for r in STEP_KEYS}, {}
    for r, key in STEP_KEYS.items():
        groups = [_fixed(budget, key, f) for f in FRACTIONS]
        errors_by[f"STEP-{r}"] = {f"{f:g}": [results[j.digest]["error"] for j in g]
                                  for f, g in zip(FRACTIONS, groups)}
        for i, f in enumerate(FRACTIONS):
            terms = [((1.0 if j == i else 0.0) - 1.0 / k, g) for j, g in enumerate(groups)]
            values, shared, df = combination(results, terms)
            name = f"STEP-{r} flat at f={f:g}"
            flat[name] = effect_from(values, name=f"e(f={f:g}) - mean_f e, STEP-{r}",
                                     units=budget.units, margin=budget.margin,
                                     shared_test_var=shared, test_df=df)
            readings[r].append(name)
    parts = dict(decide_equivalence(flat, budget.margin))
    switches = {}
    for r, key in STEP_KEYS.items():
        for scale in LANDING["loss_scales"]:
            name = f"STEP-{r} AutoSwitch lands, loss x{scale:g}"
            rows = causes(results, _auto(budget, key, scale), budget, clip=False)
            switches[name] = rows
            parts[name] = _landing(name, rows)
            readings[r].append(name)
    numbers = {"nm": list(budget.nms[0]), "errors": errors_by, "switches": switches}
    return _parts.result(sys.modules[__name__], budget, parts, numbers, readings=readings)


def figure(result, path):
    """The flatness parts (TOST); the landing parts are in the report's text."""
    return _plots.parts_figure(result, path, select=lambda name: " flat at " in name,
                               symmetric=True, note=f"{result.problem}; flatness by TOST; "
                               "AutoSwitch's landing: see the report")
