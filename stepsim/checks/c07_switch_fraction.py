"""C7 (Fig. 7): final error is flat in the switch fraction in [10%, 80%]; AutoSwitch lands at ~20%.

Quantity. Per evaluation seed, on the problem's first N:M, both readings of STEP
(PROTOCOL §5) at SR-STE's tuned learning rate: (a) switched at a fixed fraction f of the
run, f in {0.1, 0.2, 0.4, 0.6, 0.8}; (b) switched by AutoSwitch *unclipped* (Algorithm 2),
at loss x1 and x0.01: its switch fraction k0 / T (1.0 when it never fires) and its cause
(``budget.switch_cause``: "fired", "window" = the first step its window allows, "never").

Effect. (a) flatness, per reading and fraction: the deviation e_f - mean over fractions
of e, paired per seed (with the test set's sampling error); margin +-0.5 points /
+-0.02 nats. (b) landing, per reading and loss scale: the mean switch fraction.

Rule (PROTOCOL §6-7 and draft 4, registered before this evidence): all 14 parts in two
Holm families at alpha = 0.05 (``verdict.decide_equivalence``), one per verdict.
(a) flatness: REPRODUCED if TOST shows the deviation inside +-margin; NOT REPRODUCED if it
is shown outside (or the fraction's runs diverge in other seeds than the rest, exact
McNemar). (b) landing, per reading and scale, an intersection of three one-sided tests:
mean fraction > 0.1, mean fraction < 0.3 (t, no test-set part) and the rate of cause
"fired" > 0.5 (exact binomial, i.e. the Clopper-Pearson bound); REPRODUCED if all three
reject at the part's level (intersection-union: p = the largest of the three), NOT
REPRODUCED if one of the opposite tests (mean < 0.1, mean > 0.3, fired rate < 0.5) rejects
(Bonferroni over the three: p = 3 x the smallest), else INCONCLUSIVE. Per reading the
parts are combined by ``verdict.combine``; the claim is REPRODUCED if either reading is.
"""

from __future__ import annotations

import dataclasses

from stepsim import stats
from stepsim.checks import outcome, plots, protocol
from stepsim.checks.budget import STEP_KEYS, causes, effect
from stepsim.checks.registry import Claim, register
from stepsim.checks.verdict import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Directional,
    Evidence,
    Part,
    decide_equivalence,
    effect_from,
    estimate_of,
    percent,
    rule_of,
)

FRACTIONS = protocol.RULES.c7_fractions
LANDING = protocol.RULES.c7_landing


def _fixed(budget, key, f):
    return budget.runs(key, nm=budget.nms[0], switch=("fixed-fraction", {"fraction": f}))


def _auto(budget, key, scale):
    return budget.runs(key, nm=budget.nms[0], switch=("autoswitch", {}), loss_scale=scale)


def _flat_name(reading: str, f: float) -> str:
    return f"STEP-{reading} flat at f={f:g}"


def _landing_name(reading: str, scale: float) -> str:
    return f"STEP-{reading} AutoSwitch lands, loss x{scale:g}"


def part_names(budget) -> tuple:
    """The flatness parts (reading, fixed fraction), then the landing parts (reading,
    loss scale)."""
    return (*(_flat_name(r, f) for r in STEP_KEYS for f in FRACTIONS),
            *(_landing_name(r, scale) for r in STEP_KEYS for scale in LANDING.loss_scales))


def jobs(budget):
    out = []
    for key in STEP_KEYS.values():
        for f in FRACTIONS:
            out += _fixed(budget, key, f)
        for scale in LANDING.loss_scales:
            out += _auto(budget, key, scale)
    return out


def landing_part(name, rows) -> Directional:
    """A landing part (module docstring, rule (b)) for ``decide_equivalence``'s families."""
    lo, hi = LANDING.interval
    rate = LANDING.fired_rate
    fractions = [1.0 if r["fraction"] is None else r["fraction"] for r in rows]
    n = len(rows)
    fired = sum(r["cause"] == "fired" for r in rows)
    e = effect_from(fractions, name=f"{name}: mean switch fraction", units="fraction of T",
                    margin=0.0)
    est = estimate_of(e)
    up = {"above lo": est.p_greater(lo), "below hi": est.p_less(hi),
          "fired": stats.binomial_p(fired, n, rate, greater=True)}
    down = {"below lo": est.p_less(lo), "above hi": est.p_greater(hi),
            "fired": stats.binomial_p(fired, n, rate, greater=False)}
    p_rep, p_not = max(up.values()), min(1.0, 3.0 * min(down.values()))

    def decide(rep, not_rep) -> Part:
        (a, rep_ok), (b, not_ok) = rep, not_rep
        if not_ok:
            verdict, level = NOT_REPRODUCED, 1.0 - b
        elif rep_ok:
            verdict, level = REPRODUCED, 1.0 - 2.0 * a
        else:
            verdict, level = INCONCLUSIVE, 1.0 - 2.0 * a
        low, high = est.interval(level)
        cp = stats.clopper_pearson(fired, n, level)
        reason = (f"mean fraction {est.mean:.3g} [{low:.3g}, {high:.3g}] vs [{lo:g}, {hi:g}]; "
                  f"fired (not window/never) in {fired}/{n} seeds, Clopper-Pearson "
                  f"[{cp[0]:.3g}, {cp[1]:.3g}] vs rate {rate:g} ({percent(level)} level, "
                  f"Holm; p = {p_not if verdict == NOT_REPRODUCED else p_rep:.3g})")
        judged = dataclasses.replace(e, ci_low=low, ci_high=high, ci_level=level)
        return Part(name=name, effect=judged, verdict=verdict, reason=reason, level=level)

    return Directional(p_rep, p_not, decide)


def _measured(budget, results):
    """(flatness effects, landing parts, readings: reading of STEP -> part names,
    numbers)."""
    k = len(FRACTIONS)
    flat, readings, errors_by = {}, {r: [] for r in STEP_KEYS}, {}
    for r, key in STEP_KEYS.items():
        groups = [_fixed(budget, key, f) for f in FRACTIONS]
        errors_by[f"STEP-{r}"] = {f"{f:g}": [None if results[j.digest].get("diverged")
                                                  else results[j.digest]["error"] for j in g]
                                  for f, g in zip(FRACTIONS, groups)}
        for i, f in enumerate(FRACTIONS):
            terms = [((1.0 if j == i else 0.0) - 1.0 / k, g) for j, g in enumerate(groups)]
            name = _flat_name(r, f)
            flat[name] = effect(results, terms, name=f"e(f={f:g}) - mean_f e, STEP-{r}",
                                units=budget.units, margin=budget.margin)
            readings[r].append(name)
    switches, landing = {}, {}
    for r, key in STEP_KEYS.items():
        for scale in LANDING.loss_scales:
            name = _landing_name(r, scale)
            rows = causes(results, _auto(budget, key, scale), budget, clip=False)
            switches[name] = rows
            landing[name] = landing_part(name, rows)
            readings[r].append(name)
    numbers = {"nm": list(budget.nms[0]), "errors": errors_by, "switches": switches}
    return flat, landing, readings, numbers


def decide_claim(budget, results):
    flat, landing, readings, numbers = _measured(budget, results)
    parts = decide_equivalence(flat, budget.margin, others=landing)
    return outcome.result(CLAIM, budget, parts, numbers, readings=readings)


def gather(budget, results):
    """Draft 5: the flatness parts (a band of +-margin: two one-sided tests) and the
    landing parts, decided with every reading of the claim."""
    flat, landing, readings, numbers = _measured(budget, results)
    parts = {**{n: Evidence(e, kind="band") for n, e in flat.items()}, **landing}
    return outcome.Gathered(parts, numbers, readings)


def figure(result, path):
    """The flatness parts (TOST); the landing parts are in the report's text."""
    return plots.parts_figure(result, path, select=lambda name: " flat at " in name,
                               symmetric=True, note=f"{result.problem}; flatness by TOST; "
                               "AutoSwitch's landing: see the report")


CLAIM = register(Claim(
    id="C7",
    title=("Final error is flat for switch fractions in [10%, 80%]; AutoSwitch lands near 20% "
           "(Fig. 7)"),
    rule=rule_of(__doc__), jobs=jobs, decide=decide_claim, parts=part_names,
    figure=figure, gather=gather))
