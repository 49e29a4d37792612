"""Calibration of the registered verdict rules (paper_checks/PROTOCOL.md §6, last bullet).

Every rule of :mod:`stepsim.checks.verdict` that decides a claim is fed simulated effects
of known size with the protocol's n = 8 seeds, 2000 simulations per case, and must give at
most 5% wrong verdicts: REPRODUCED when the true effect is <= 0, NOT REPRODUCED when it is
>= the margin (delta = 0.5 points).

Noise model of one seed's effect value: truth + seed noise (sd 0.4, or 0) + test-set
sampling noise (sd 0.5), independent between seeds, with the test variance 0.25 passed to
the rule as ``test_vars``: the simulation generates the test noise it tells the rule about.
The protocol's SE_test = sqrt(mean(var_i) / n) assumes exactly this independence.
:func:`test_shared_test_set_error_is_not_covered` records what happens when the test-set
error is instead common to all seeds (one fixed test set): see its docstring.

Each case prints its rate (``pytest -s`` shows the table). Cases draw from their own
streams, ``np.random.default_rng([20261125, crc32(case)])``, so a case's numbers do not
depend on which other cases run.

The draft-4 section at the end (issue 23 item 9) is the stronger test: per-item 0/100 errors
on one test set shared by the seeds and by the recipes of a seed, divergence in one and in
both recipes, parts sharing runs, C7's TOST at 0.98 of the margin and its landing parts,
all through the production estimate (``budget.effect``), and a negative control (draft 2's
estimate) that must fail. Its heavy cases are marked slow (CI runs them with --runslow).
"""

from __future__ import annotations

import functools
import json
import math
import zlib

import numpy as np
import pytest

from stepsim._ground.provenance import to_jsonable
from stepsim.checks import simulated_views as SV
from stepsim.checks import verdict as V

N_SEEDS = 8
DELTA = 0.5  # margin, points
SEED_SD = 0.4
TEST_SD = 0.5
SIMS = 2000
MAX_WRONG = 0.05
NOISE = {"seed0.4+test0.5": (SEED_SD, TEST_SD), "seed0+test0.5": (0.0, TEST_SD)}
R, NR, INC = V.REPRODUCED, V.NOT_REPRODUCED, V.INCONCLUSIVE


def _rng(case: str) -> np.random.Generator:
    return np.random.default_rng([20261125, zlib.crc32(case.encode())])


def _simulate(case: str, truths, seed_sd: float, test_sd: float, shared_sd: float = 0.0):
    """(values, test_var): values (SIMS, k, N_SEEDS) = truth + seed noise (independent per
    seed: training randomness) + test-set noise. As in the protocol's problems, every seed
    is evaluated on the same test set, so the test-set noise is ONE draw per simulation and
    part, common to all seeds, with variance test_sd^2 + shared_sd^2; test_var: that
    variance, which the rule is told (``shared_test_var``)."""
    rng = _rng(case)
    truths = np.asarray(truths, dtype=np.float64)
    shape = (SIMS, truths.size, N_SEEDS)
    test_var = test_sd ** 2 + shared_sd ** 2
    values = (truths[None, :, None] + seed_sd * rng.standard_normal(shape)
              + math.sqrt(test_var) * rng.standard_normal(shape[:2] + (1,)))
    return values, test_var


def _effect(values, test_var, margin=DELTA, name="e"):
    return V.effect_from(values, name=name, units="points", margin=margin,
                         shared_test_var=test_var)


def _wrong(verdict: str, truth: float, margin: float) -> bool:
    return (verdict == R and truth <= 0) or (verdict == NR and truth >= margin)


def _show(case: str, **rates) -> None:
    cells = "  ".join(f"{k} {v:.4f}" for k, v in rates.items())
    print(f"\ncalibration  {case:<48} {cells}")


# --- single part (k = 1) -----------------------------------------------------------------

@functools.cache
def _single_part(truth: float, noise: str) -> dict:
    """Verdict counts of decide_parts on one part, SIMS simulations."""
    values, test_var = _simulate(f"single {truth} {noise}", [truth], *NOISE[noise])
    counts = {R: 0, NR: 0, INC: 0}
    for sim in values[:, 0]:
        counts[V.decide_parts({"e": V.Evidence(_effect(sim, test_var))})["e"].verdict] += 1
    return {k: v / SIMS for k, v in counts.items()}


@pytest.mark.parametrize("noise", list(NOISE))
@pytest.mark.parametrize("truth", [0.0, -DELTA, DELTA, 2 * DELTA])
def test_single_part(truth, noise):
    rates = _single_part(truth, noise)
    wrong = (rates[R] if truth <= 0 else 0.0) + (rates[NR] if truth >= DELTA else 0.0)
    _show(f"k=1 truth={truth:g} {noise}", wrong=wrong, reproduced=rates[R],
          not_reproduced=rates[NR])
    assert wrong <= MAX_WRONG


@pytest.mark.parametrize("noise", list(NOISE))
def test_power_is_not_trivially_zero(noise):
    """A rule too conservative to be useful would pass every test above: at 3 delta with
    k = 1 the effect must be found in at least half the simulations. (With one test set
    shared by the seeds, sd 0.5 on the effect, even an ideal z-test finds 2 delta in only
    ~49% of simulations: the test set, not the rule, limits the power there.)"""
    rates = _single_part(3 * DELTA, noise)
    _show(f"power k=1 truth=3delta {noise}", reproduced=rates[R])
    assert rates[R] >= 0.5


# --- several parts with Holm -------------------------------------------------------------

SCENARIOS = {
    "all at 0": lambda k: [0.0] * k,
    "all at delta": lambda k: [DELTA] * k,
    "all at 2 delta": lambda k: [2 * DELTA] * k,
    "one at 0, others at 2 delta": lambda k: [0.0] + [2 * DELTA] * (k - 1),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("k", [2, 4, pytest.param(6, marks=pytest.mark.slow)])
def test_holm_parts(k, scenario):
    """Claim wrong: REPRODUCED while some part's truth <= 0, NOT REPRODUCED while every
    part's truth >= margin. Family-wise: any part with a wrong verdict (what Holm bounds)."""
    truths = SCENARIOS[scenario](k)
    values, test_var = _simulate(f"holm {k} {scenario}", truths, *NOISE["seed0.4+test0.5"])
    claim_wrong = any_part_wrong = claim_reproduced = 0
    names = [f"p{j}" for j in range(k)]
    for sim in values:
        parts = V.decide_parts({n: V.Evidence(_effect(x, test_var, name=n))
                                for n, x in zip(names, sim)})
        verdicts = [parts[n].verdict for n in names]
        claim = V.combine(verdicts)
        claim_reproduced += claim == R
        claim_wrong += ((claim == R and min(truths) <= 0)
                        or (claim == NR and min(truths) >= DELTA))
        any_part_wrong += any(_wrong(v, t, DELTA) for v, t in zip(verdicts, truths))
    rates = {"claim_wrong": claim_wrong / SIMS, "familywise": any_part_wrong / SIMS,
             "claim_reproduced": claim_reproduced / SIMS}
    _show(f"k={k} {scenario}", **rates)
    assert rates["claim_wrong"] <= MAX_WRONG
    assert rates["familywise"] <= MAX_WRONG


# --- premise gate ------------------------------------------------------------------------

@pytest.mark.parametrize("noise", list(NOISE))
def test_premise_gate_stops_an_absent_premise(noise):
    """Premise truly 0, effect at 2 delta: the gate may let the part through (premise judged
    present) in at most 5% of the simulations."""
    values, test_var = _simulate(f"premise {noise}", [0.0, 2 * DELTA], *NOISE[noise])
    through = reproduced = 0
    for premise_x, effect_x in values:
        premise = _effect(premise_x, test_var, margin=0.0, name="premise")
        evidence = V.Evidence(_effect(effect_x, test_var), premise, "gap > 0")
        part = V.decide_parts({"e": evidence})["e"]
        absent = part.reason.startswith("premise absent: gap > 0")
        assert absent == (not V.premise_present(premise))
        through += not absent
        reproduced += part.verdict == R
    _show(f"premise truth 0, effect 2delta {noise}", gate_passes=through / SIMS,
          reproduced=reproduced / SIMS)
    # the gate is a one-sided test at exactly alpha = 0.05, so its true pass rate at a
    # premise of 0 IS 5%: the check is that the simulated rate is not significantly above
    # it (Clopper-Pearson 95% lower end <= 5%), not a verdict's error rate (those are <= 5%)
    assert _not_above(through, MAX_WRONG)


def _not_above(count: int, rate: float) -> bool:
    """The 95% Clopper-Pearson interval of count / SIMS reaches down to ``rate``."""
    from scipy import stats

    return count == 0 or stats.beta.ppf(0.025, count, SIMS - count + 1) <= rate


# --- direction-only parts (margin 0) -----------------------------------------------------

@pytest.mark.parametrize("noise", list(NOISE))
@pytest.mark.parametrize("k", [1, 3])
def test_direction_parts_at_zero(k, noise):
    """margin 0, truth 0: REPRODUCED and NOT REPRODUCED are both wrong."""
    values, test_var = _simulate(f"direction {k} {noise}", [0.0] * k, *NOISE[noise])
    rep = notrep = anywrong = 0
    names = [f"d{j}" for j in range(k)]
    for sim in values:
        parts = V.decide_parts({n: V.Evidence(_effect(x, test_var, margin=0.0, name=n))
                                for n, x in zip(names, sim)})
        verdicts = [parts[n].verdict for n in names]
        rep += R in verdicts
        notrep += NR in verdicts
        anywrong += any(v != INC for v in verdicts)
    _show(f"direction k={k} truth=0 {noise}", any_reproduced=rep / SIMS,
          any_not_reproduced=notrep / SIMS, familywise=anywrong / SIMS)
    assert rep / SIMS <= MAX_WRONG and notrep / SIMS <= MAX_WRONG
    # family-wise, both directions at 0 with margin 0 are "wrong": nominally exactly 5%
    assert _not_above(anywrong, MAX_WRONG)


# --- flatness by TOST (C7) ---------------------------------------------------------------

FRACTIONS = 5
TOST_SCENARIOS = {
    # raw per-fraction errors; the deviation of fraction f is e_f - mean_f e
    "flat": [0.0] * FRACTIONS,
    "one fraction off by 1.5 delta": [1.5 * DELTA] + [0.0] * (FRACTIONS - 1),
    "one deviation exactly delta": [DELTA * FRACTIONS / (FRACTIONS - 1)]
    + [0.0] * (FRACTIONS - 1),
}


@pytest.mark.parametrize("noise", list(NOISE))
@pytest.mark.parametrize("scenario", [
    s if s == "flat" else pytest.param(s, marks=pytest.mark.slow) for s in TOST_SCENARIOS])
def test_tost_flatness(scenario, noise):
    """Per seed and fraction: error = seed base (sd 1, common to the fractions) + truth +
    seed noise + test noise; deviations d_f = e_f - mean_f e as the claim computes them,
    with the test variance of that combination (independent test noise per run:
    test_sd^2 (1 - 1/F)). Flat truth: NOT REPRODUCED is wrong; a deviation >= margin:
    REPRODUCED is wrong."""
    seed_sd, test_sd = NOISE[noise]
    truth = np.asarray(TOST_SCENARIOS[scenario])
    rng = _rng(f"tost {scenario} {noise}")
    shape = (SIMS, FRACTIONS, N_SEEDS)
    errors = (rng.standard_normal((SIMS, 1, N_SEEDS)) + truth[None, :, None]
              + seed_sd * rng.standard_normal(shape)
              + test_sd * rng.standard_normal((SIMS, FRACTIONS, 1)))  # one test set
    deviations = errors - errors.mean(axis=1, keepdims=True)
    test_var = test_sd ** 2 * (1 - 1 / FRACTIONS)
    true_dev = truth - truth.mean()
    counts = {R: 0, NR: 0, INC: 0}
    names = [f"f{j}" for j in range(FRACTIONS)]
    for sim in deviations:
        parts = V.decide_equivalence({n: _effect(x, test_var, margin=0.0, name=n)
                                      for n, x in zip(names, sim)}, DELTA)
        counts[V.combine(parts[n].verdict for n in names)] += 1
    rates = {k: v / SIMS for k, v in counts.items()}
    flat = bool(np.all(np.abs(true_dev) < DELTA))
    wrong = rates[NR] if flat else rates[R]
    _show(f"TOST {scenario} {noise}", wrong=wrong, reproduced=rates[R],
          not_reproduced=rates[NR])
    assert np.all(np.abs(true_dev) < 1e-12) or np.max(np.abs(true_dev)) >= DELTA - 1e-12
    assert wrong <= MAX_WRONG


# --- the test can fail -------------------------------------------------------------------

def _old_effect(values, *, name: str, units: str, margin: float):
    """An Effect as the checks before the protocol made them (and as old report.json files
    hold them): a t-interval over seeds, no se fields."""
    from stepsim import stats

    est = stats.mean_ci(values)
    return V.Effect(name=name, estimate=est.mean, ci_low=est.low, ci_high=est.high,
                    ci_level=0.95, n=len(values), units=units, margin=float(margin),
                    values=tuple(float(v) for v in values))


def _old_rule(values, margin: float) -> str:
    """The rule of the checks before the protocol (kept here only as the negative
    control): a 95% Student-t interval of the per-seed values, spread over seeds only;
    NOT REPRODUCED if its upper end < margin, REPRODUCED if its lower end > 0."""
    from stepsim import stats

    est = stats.mean_ci(values)
    if not (math.isfinite(est.low) and math.isfinite(est.high)):
        return INC
    if est.high < margin:
        return NR
    return R if est.low > 0 else INC


def test_old_rule_is_caught_by_the_calibration():
    """Negative control: the old rule (a t-interval over seeds only) when the
    seeds agree (seed sd 0) and the test-set error (sd 0.5) is the same for every seed,
    as with one fixed test set: the values have no spread, the old interval is a point, and
    its verdicts are wrong far more than 5% of the time (at truth 0: REPRODUCED whenever
    the test set's draw exceeds the margin; at truth delta: NOT REPRODUCED whenever it is
    below 0). With *independent* test noise the old rule is a valid t-test and passes."""
    rates = {}
    for truth in (0.0, DELTA):
        values, _ = _simulate(f"old rule shared {truth}", [truth], 0.0, 0.0, shared_sd=TEST_SD)
        wrong = sum(_wrong(_old_rule(x, DELTA), truth, DELTA) for x in values[:, 0])
        rates[f"truth={truth:g}"] = wrong / SIMS
    _show("OLD rule, seed0, shared test0.5", **rates)
    assert rates["truth=0"] > MAX_WRONG
    assert rates["truth=0.5"] > MAX_WRONG


def test_shared_test_set_error_is_covered():
    """The rule when the test-set error is common to all seeds (seed sd 0, shared test sd
    0.5, told as ``shared_test_var``, PROTOCOL §6 draft 2): at truth 0 it says REPRODUCED
    in at most 5% of simulations. (Draft 1's sqrt(mean(var_i) / n), which treats the seeds'
    test errors as independent, said REPRODUCED in ~20% here.)"""
    values, test_var = _simulate("new rule shared 0", [0.0], 0.0, 0.0, shared_sd=TEST_SD)
    wrong = sum(V.decide_parts({"e": V.Evidence(_effect(x, test_var))})["e"].verdict == R
                for x in values[:, 0]) / SIMS
    _show("NEW rule, seed0, shared test0.5, truth 0", wrong=wrong)
    assert wrong <= MAX_WRONG


# --- the rules on hand-made effects ------------------------------------------------------

def test_effect_from_and_its_json_round_trip():
    e = V.effect_from([1.0, 2.0, 3.0, 4.0, 5.0], [0.5] * 5, name="gap", units="points",
                      margin=0.5)
    assert (e.estimate, e.n, e.margin, e.values) == (3.0, 5, 0.5, (1.0, 2.0, 3.0, 4.0, 5.0))
    assert (e.se_seeds, e.se_test) == pytest.approx((math.sqrt(0.5), math.sqrt(0.1)))
    half = 2.7764451051977987 * math.sqrt(0.6)  # t_{0.975, 4} * se
    assert (e.ci_low, e.ci_high) == pytest.approx((3 - half, 3 + half), rel=1e-12)
    # JSON (NaN as "nan") and back with Effect(**dict), as outputs.load_report does
    old = _old_effect([1.0, 2.0], name="old", units="", margin=1.0)
    for effect in (e, old, V.effect_from([1.0], None, name="one", units="", margin=0.0)):
        d = json.loads(json.dumps(to_jsonable(effect)))
        back = V.Effect(**{**d, "ci_low": float(d["ci_low"]), "ci_high": float(d["ci_high"]),
                           "values": tuple(d["values"])})
        assert to_jsonable(back) == to_jsonable(effect)
        assert isinstance(back.se_seeds, float) and isinstance(back.se_test, float)
    assert math.isnan(old.se_seeds) and math.isnan(old.se_test)
    # a zero-spread effect with test variances has an interval, not a point
    flat = V.effect_from([0.2] * 8, [0.25] * 8, name="f", units="points", margin=0.5)
    assert flat.ci_low < 0.2 < flat.ci_high


@pytest.mark.parametrize("call, error, match", [
    (lambda: V.effect_from([1.0, 2.0], name="e", units="", margin=-0.1), ValueError, "margin"),
    (lambda: V.effect_from([1.0, 2.0], name="e", units="", margin=math.inf), ValueError,
     "margin"),
    (lambda: V.effect_from([1.0, 2.0], name="e", units="", margin="1"), TypeError, "margin"),
    (lambda: V.effect_from([1.0, math.nan], name="e", units="", margin=1.0), ValueError,
     "effect 'e': values has non-finite"),
    (lambda: V.effect_from([1.0, 2.0], [0.1], name="e", units="", margin=1.0), ValueError,
     "test_vars must have one"),
    (lambda: V.effect_from([1.0, 2.0], name="e", units="", margin=1.0, ci_level=1.0),
     ValueError, "ci_level"),
    (lambda: V.decide_parts({"a": _old_effect([1, 2], name="a", units="", margin=1)}),
     TypeError, r"parts\['a'\] must be an Evidence \(effect, premise, premise_text\)"),
    (lambda: V.decide_parts({"a": (_old_effect([1, 2], name="a", units="", margin=1),
                                   None, "")}), TypeError, "must be an Evidence"),
    (lambda: V.Evidence("effect"), TypeError, "effect must be an Effect"),
    (lambda: V.Evidence(_old_effect([1, 2], name="a", units="", margin=1), premise=1.0),
     TypeError, "premise must be an Effect, a tuple of Effects or None"),
    (lambda: V.decide_parts({"a": V.Evidence(_old_effect([1, 2], name="a", units="",
                                                         margin=1))}, alpha=0.0),
     ValueError, "alpha"),
    (lambda: V.decide_parts([1, 2]), TypeError, "parts must map"),
    (lambda: V.decide_equivalence({"a": _old_effect([1, 2], name="a", units="", margin=1)},
                                  0.0), ValueError, "margin"),
    (lambda: V.decide_equivalence({"a": (1, 2)}, 1.0), TypeError, "must be an Effect"),
    (lambda: V.decide_equivalence({}, 1.0, others={"l": (0.1, 0.2)}), TypeError,
     "others\\['l'\\] must be a Directional"),
    (lambda: V.premise_present(_old_effect([1, 2], name="a", units="", margin=1), alpha=1.5),
     ValueError, "alpha"),
    (lambda: V.Part("a", _old_effect([1, 2], name="a", units="", margin=1), "YES", "", 0.95),
     ValueError, "verdict"),
])
def test_bad_input_names_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_decide_parts_on_hand_made_effects():
    big = V.effect_from([0.8, 1.1, 0.9, 1.3, 0.7, 1.0, 1.2, 0.9], [0.25] * 8, name="big",
                        units="points", margin=0.5)
    small = V.effect_from([0.05, -0.1, 0.02, 0.0, 0.1, -0.05, 0.03, 0.01], [0.001] * 8,
                          name="small", units="points", margin=0.5)
    noisy = V.effect_from([0.5, -1.0, 2.0, -0.5, 1.5, 0.0, 1.0, -1.5], [0.25] * 8,
                          name="noisy", units="points", margin=0.5)
    absent = V.effect_from([0.1, -0.2, 0.3, 0.0, 0.1, 0.2, -0.1, 0.0], [0.01] * 8,
                           name="premise", units="points", margin=0.0)
    one = V.effect_from([1.0], [0.1], name="one", units="points", margin=0.5)
    parts = V.decide_parts({"big": V.Evidence(big), "small": V.Evidence(small),
                            "noisy": V.Evidence(noisy),
                            "gated": V.Evidence(big, absent, "SR-STE gap > 0"),
                            "one": V.Evidence(one)})
    assert list(parts) == ["big", "small", "noisy", "gated", "one"]
    assert {k: p.verdict for k, p in parts.items()} == {
        "big": R, "small": NR, "noisy": INC, "gated": INC, "one": INC}
    # Holm over the three parts with an interval: the smallest p gets 0.05/3, then 0.025
    assert sorted([parts["big"].level, parts["small"].level]) == pytest.approx(
        [1 - 0.025, 1 - 0.05 / 3])
    assert parts["noisy"].level == pytest.approx(0.95)
    for p in parts.values():
        assert p.effect.ci_level == p.level or p.name == "one"
    est = V.estimate_of(big)
    assert (parts["big"].effect.ci_low, parts["big"].effect.ci_high) == est.interval(
        parts["big"].level)
    assert parts["big"].reason.startswith("CI lower end ")
    assert parts["big"].reason == (f"CI lower end {parts['big'].effect.ci_low:.3g} > 0 points "
                                   f"(Holm level {100 * parts['big'].level:.4g}%)")
    assert parts["small"].reason.startswith("CI upper end ")
    assert (f"< margin 0.5 points (Holm level {100 * parts['small'].level:.4g}%)"
            in parts["small"].reason)
    assert "contains 0 and reaches the margin 0.5" in parts["noisy"].reason
    lb = V.estimate_of(absent).lower_bound(0.05)
    assert parts["gated"].reason == (f"premise absent: SR-STE gap > 0 (0.05, one-sided 95% "
                                     f"lower bound {lb:.3g})")
    assert parts["gated"].level == pytest.approx(0.9) and parts["gated"].premise is absent
    assert parts["one"].reason == "1 paired value(s): no interval"
    assert all("\n" not in p.reason for p in parts.values())
    json.dumps(to_jsonable(parts))  # JSON-ready
    # the premise present: the part is judged as without it
    present = V.decide_parts({"big": V.Evidence(big, big, "big > 0")})["big"]
    assert present.verdict == R and present.premise is big
    # direction-only parts: margin 0
    down = V.effect_from([-x for x in big.values], [0.25] * 8, name="down", units="points",
                         margin=0.0)
    d = V.decide_parts({"up": V.Evidence(dataclasses_replace(big, margin=0.0)),
                        "down": V.Evidence(down)})
    assert (d["up"].verdict, d["down"].verdict) == (R, NR)
    assert "< 0 points" in d["down"].reason


def dataclasses_replace(effect, **kw):
    import dataclasses

    return dataclasses.replace(effect, **kw)


def test_premise_present_reads_old_and_new_effects():
    new = V.effect_from([0.3, 0.5, 0.4, 0.6], [0.01] * 4, name="p", units="", margin=0.0)
    est = V.estimate_of(new)
    assert V.premise_present(new) == (est.lower_bound(0.05) > 0) is True
    # an Effect without se fields (old reports): se = sd(values)/sqrt(n)
    old = _old_effect([0.3, 0.5, 0.4, 0.6], name="p", units="", margin=1.0)
    old_est = V.estimate_of(old)
    assert old_est.se == pytest.approx(np.std([0.3, 0.5, 0.4, 0.6], ddof=1) / 2, rel=1e-12)
    assert old_est.interval(0.95) == pytest.approx((old.ci_low, old.ci_high), rel=1e-12)
    # without values, from the interval's width
    bare = dataclasses_replace(old, values=())
    assert V.estimate_of(bare).se == pytest.approx(old_est.se, rel=1e-12)
    assert V.premise_present(old) and V.premise_present(bare)
    assert not V.premise_present(V.effect_from([0.3], None, name="p", units="", margin=0.0))
    assert not V.premise_present(dataclasses_replace(new, estimate=-0.1))


def test_not_reproduced_has_its_own_holm_family():
    """Draft 4: a deviation whose 95% interval lies outside the margin but whose interval at
    its NOT REPRODUCED Holm level (here 1 - 0.05/10) does not, among 10 parts, is
    INCONCLUSIVE (draft 3 judged it at the unadjusted 95% its TOST rank gave it)."""
    def dev(values):
        return V.effect_from(values, [0.001] * len(values), name="d", units="points",
                             margin=0.0)

    tight = dev([0.05, -0.1, 0.02, 0.0, 0.1, -0.05, 0.03, 0.01])
    edge = dev([0.9, 0.5, 1.3, 0.7, 1.1, 0.6, 1.2, 0.8])  # mean 0.8875, se ~0.1
    est = V.estimate_of(edge)
    assert est.interval(0.95)[0] > 0.5 > est.interval(1 - 0.05 / 10)[0]
    parts = V.decide_equivalence({**{f"t{j}": tight for j in range(9)}, "edge": edge}, 0.5)
    assert parts["edge"].verdict == INC and parts["edge"].level == pytest.approx(1 - 0.005)
    assert all(parts[f"t{j}"].verdict == R for j in range(9))
    alone = V.decide_equivalence({"edge": edge, "t": tight}, 0.5)
    assert alone["edge"].verdict == NR and "NOT REPRODUCED family" in alone["edge"].reason


def test_decide_equivalence_on_hand_made_effects():
    def dev(values, var=0.001):
        return V.effect_from(values, [var] * len(values), name="d", units="points", margin=0.0)

    tight = dev([0.05, -0.1, 0.02, 0.0, 0.1, -0.05, 0.03, 0.01])
    off = dev([1.5, 1.4, 1.6, 1.5, 1.45, 1.55, 1.5, 1.5])
    wide = dev([0.5, -1.0, 2.0, -0.5, 1.5, 0.0, 1.0, -1.5])
    parts = V.decide_equivalence({"tight": tight, "off": off, "wide": wide}, 0.5)
    assert {k: p.verdict for k, p in parts.items()} == {"tight": R, "off": NR, "wide": INC}
    # tight has the smallest TOST p: Holm level 0.05/3, judged on its 1 - 2 a interval
    assert parts["tight"].level == pytest.approx(1 - 2 * 0.05 / 3)
    assert -0.5 < parts["tight"].effect.ci_low < parts["tight"].effect.ci_high < 0.5
    assert "inside (-0.5, 0.5) points" in parts["tight"].reason
    assert parts["off"].effect.ci_low >= 0.5 and "outside" in parts["off"].reason
    assert V.combine(p.verdict for p in parts.values()) == NR
    assert V.combine(V.decide_equivalence({"a": tight, "b": tight}, 0.5)[k].verdict
                     for k in ("a", "b")) == R
    assert V.decide_equivalence({"one": dev([0.0])}, 0.5)["one"].verdict == INC


# =========================================================================================
# Draft 4 (issue 23 item 9): per-item 0/100 errors through the production estimate
# =========================================================================================
#
# One simulation = one test set of N_ITEMS items drawn from a population of items, shared
# by every seed and every recipe of a seed, as on the protocol's problems. Recipe r, seed s,
# item i errs (100 points) with probability q_i (1 + shift_r / (100 mu)) (1 + g_rs):
# q_i the item's difficulty (a three-stratum population with mean mu), shift_r the recipe's
# true error over the population in points, g_rs = c_s + e_rs a seed factor (c_s common to
# the recipes of a seed, e_rs the recipe's own; both uniform, mean 0), and the uniform draws
# of the recipes of a seed are shared per item with probability RHO (common random
# numbers: two recipes tend to miss the same images). So the expected error of recipe r
# is exactly 100 mu + shift_r, and a contrast's truth is the contrast of the shifts. A run
# diverges with its recipe's rate (independently): its items are all 100 and its view
# says ``diverged``, as ``execution.view`` makes it. Each simulation's views go through the
# very functions the claims call: ``budget.effect`` (``combination``,
# ``stats.shared_test_variance``, the divergence record), ``verdict.decide_parts`` /
# ``decide_equivalence`` and C7's ``_landing``; parts share runs as the claims' parts do.
#
# Truths (PROTOCOL draft 4): the error effect is the contrast among runs that stayed
# finite; divergence is its own outcome. A part's REPRODUCED is wrong when neither outcome
# favours the claim (error truth <= 0 and the claimed-better side diverges at least as
# often); NOT REPRODUCED is wrong when the error truth >= margin and the claimed-better side
# diverges no more often.

N_ITEMS = SV.N_ITEMS
SIMS4 = 2000


def _world(case: str):
    """The simulation stream of a case (``stepsim.checks.simulated_views.world``)."""
    return SV.world(_rng("draft4 " + case))


def _prod_effect(views, terms, margin=DELTA, name="e"):
    from stepsim.checks import budget as budget_module

    return budget_module.effect(views, terms, name=name, units="points", margin=margin)


def _draft2_effect(views, terms, margin=DELTA, name="e"):
    """Draft 2/3's estimate (the negative control): a diverged run scored as its items (every
    image wrong) and averaged; SE_test^2 = var over items of the seed-averaged contrast / N
    (``stats.combination_variance``), which counts the within-seed item noise twice."""
    from stepsim import stats

    coefs = [float(c) for c, _ in terms]
    values, items = [], 0.0
    for i in range(N_SEEDS):
        vs = [views[runs[i].digest] for _, runs in terms]
        values.append(sum(c * v["error"] for c, v in zip(coefs, vs)))
        items = items + np.stack([v["items"] for v in vs])
    shared = stats.combination_variance(items / N_SEEDS, coefs)
    return V.effect_from(values, name=name, units="points", margin=margin,
                         shared_test_var=shared, test_df=N_ITEMS - 1)


def _limit(count: int, sims: int = SIMS4) -> bool:
    """The wrong-verdict count is not significantly above 5%: its 95% Clopper-Pearson
    interval reaches down to 5% (i.e. rate <= 5% plus the Monte-Carlo error)."""
    from scipy import stats

    return count == 0 or stats.beta.ppf(0.025, count, sims - count + 1) <= MAX_WRONG


def _mc(rate: float, sims: int = SIMS4) -> str:
    return f"{rate:.4f}+-{math.sqrt(max(rate * (1 - rate), 1e-12) / sims):.4f}"


def _show4(case: str, **rates) -> None:
    cells = "  ".join(f"{k} {_mc(v) if isinstance(v, float) else v}" for k, v in rates.items())
    print(f"\ncalibration4  {case:<44} {cells}")


# --- one part, E = e(A) - e(B) (A: the recipe the claim says is worse) -------------------

PAIR_CASES = {
    # name: (truth of E in points, divergence rate of A, of B, fast?)
    "truth 0": (0.0, 0.0, 0.0, True),
    "truth delta": (DELTA, 0.0, 0.0, False),
    "truth 0, better side B diverges 2%": (0.0, 0.0, 0.02, False),
    "truth delta, worse side A diverges 2%": (DELTA, 0.02, 0.0, False),
    "truth 0, both diverge 30%": (0.0, 0.3, 0.3, False),
    "truth delta, both diverge 30%": (DELTA, 0.3, 0.3, False),
    "truth delta, both diverge 97%": (DELTA, 0.97, 0.97, True),
    "power: truth 2 delta": (2 * DELTA, 0.0, 0.0, False),
    "power: truth 3 delta": (3 * DELTA, 0.0, 0.0, False),
}


#: the cases whose simulations also go through draft 2's estimate (the negative controls):
#: both estimates on the same draws (a paired comparison, and the draws are made once)
WITH_DRAFT2 = ("truth 0", "truth delta, both diverge 97%")


def _pair(case: str, estimate: str = "production") -> dict:
    return _pair_estimates(case)[estimate]


@functools.cache
def _pair_estimates(case: str) -> dict:
    """estimate ("production", and "draft 2" for the cases of WITH_DRAFT2) -> rates."""
    truth, rate_a, rate_b, _ = PAIR_CASES[case]
    draw = _world(f"pair {case}")
    makes = {"production": _prod_effect}
    if case in WITH_DRAFT2:
        makes["draft 2"] = _draft2_effect
    counts = {k: {R: 0, NR: 0, INC: 0, "both diverged": 0} for k in makes}
    estimates, variances = {k: [] for k in makes}, {k: [] for k in makes}
    for _ in range(SIMS4):
        views, runs = draw({"A": (truth, rate_a), "B": (0.0, rate_b)})
        for k, make in makes.items():
            e = make(views, [(1, runs["A"]), (-1, runs["B"])])
            part = V.decide_parts({"e": V.Evidence(e)})["e"]
            counts[k][part.verdict] += 1
            counts[k]["both diverged"] += part.reason.startswith("both diverged")
            if e.n == N_SEEDS:
                estimates[k].append(e.estimate)
                variances[k].append(e.se_seeds ** 2 + e.se_test ** 2)
    out = {}
    for k in makes:
        out[k] = {c: v / SIMS4 for c, v in counts[k].items()}
        out[k]["counts"] = counts[k]
        if len(estimates[k]) > 100:
            out[k]["se_ratio"] = float(np.mean(variances[k]) / np.var(estimates[k], ddof=1))
    return out


def _pair_wrong(case: str, rates: dict) -> tuple[str, int]:
    truth, rate_a, rate_b, _ = PAIR_CASES[case]
    if truth <= 0 and rate_a <= rate_b:
        return "REPRODUCED", rates["counts"][R]
    if truth >= DELTA and rate_b <= rate_a:
        return "NOT REPRODUCED", rates["counts"][NR]
    return "none", 0


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=() if spec[3] else pytest.mark.slow)
    for c, spec in PAIR_CASES.items() if not c.startswith("power")])
def test_one_part_through_the_production_estimate(case):
    rates = _pair(case)
    kind, wrong = _pair_wrong(case, rates)
    _show4(f"k=1 {case}", wrong=wrong / SIMS4, reproduced=rates[R],
           not_reproduced=rates[NR], both_diverged=rates["both diverged"])
    assert kind != "none" and _limit(wrong)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["power: truth 2 delta", "power: truth 3 delta"])
def test_one_part_power(case):
    """Not an error rate: how often the rule finds a real effect (reported; at 3 delta the
    per-item noise model must leave a useful power)."""
    rates = _pair(case)
    _show4(f"k=1 {case}", reproduced=rates[R])
    if "3 delta" in case:
        assert rates[R] >= 0.5


def test_the_standard_error_counts_the_item_noise_once():
    """The production SE^2 (seeds x items decomposition) against the Monte-Carlo variance of
    the estimate over the same simulations: calibrated (ratio near 1); draft 2's formula
    counts the within-seed item noise twice (ratio well above 1, intervals too wide)."""
    new = _pair("truth 0")["se_ratio"]
    old = _pair("truth 0", "draft 2")["se_ratio"]
    _show4("SE^2 / Var(estimate), truth 0", production=f"{new:.3f}", draft2=f"{old:.3f}")
    # the ratio of a mean of 2000 variance estimates to an MC variance: ~ +-7% at 2 sd
    assert 0.85 <= new <= 1.15
    assert old > new * 1.2


def test_draft_2_formula_is_caught_by_the_calibration():
    """Negative control: draft 2's estimate (a diverged run scored as every image wrong and
    averaged) where both recipes diverge in 97% of runs and the finite runs' truth is the
    margin: when every seed lost both runs, every value and every item contrast is 0, the
    interval is the point 0 and the margin is "ruled out" — NOT REPRODUCED, wrong, in far more
    than 5% of simulations. The production rule says "both diverged" instead."""
    case = "truth delta, both diverge 97%"
    old, new = _pair(case, "draft 2"), _pair(case)
    _show4(f"DRAFT 2 k=1 {case}", wrong=old[NR])
    assert old[NR] > MAX_WRONG and not _limit(old["counts"][NR])
    assert new["both diverged"] > 0.5 and _limit(new["counts"][NR])


# --- parts that share runs: C5-shaped gap parts with premise, Holm over 4 parts ----------

def _gap_case(case: str, gap_step: float, rates: dict) -> dict:
    """Dense D, baselines B1, B2 (gap 1.0 point each), STEP readings S1, S2 (gap
    ``gap_step``); parts "S_r vs B_b": E = gap(B) - 2 gap(S) = e_B - 2 e_S + e_D with premise
    gap(B) > 0, as ``gaps.gap_parts`` builds them (runs shared by the parts)."""
    draw = _world(f"gaps {case}")
    truth = 1.0 - 2 * gap_step
    any_wrong = claim_wrong = claim_rep = 0
    for _ in range(SIMS4):
        views, runs = draw({"D": (0.0, rates.get("D", 0.0)), "B1": (1.0, 0.0),
                            "B2": (1.0, 0.0), "S1": (gap_step, rates.get("S1", 0.0)),
                            "S2": (gap_step, rates.get("S2", 0.0))})
        todo = {}
        for b in ("B1", "B2"):
            premise = _prod_effect(views, [(1, runs[b]), (-1, runs["D"])], name=f"gap {b}")
            for s in ("S1", "S2"):
                e = _prod_effect(views, [(1, runs[b]), (-2, runs[s]), (1, runs["D"])],
                                 name=f"{s} vs {b}")
                todo[f"{s} vs {b}"] = V.Evidence(e, premise, f"{b}'s gap > 0")
        parts = V.decide_parts(todo)
        verdicts = [p.verdict for p in parts.values()]
        rate_s = max(rates.get("S1", 0.0), rates.get("S2", 0.0))
        wrong_r = truth <= 0 and rates.get("D", 0.0) <= rate_s
        wrong_nr = truth >= DELTA and rate_s <= rates.get("D", 0.0)
        bad = [(v == R and wrong_r) or (v == NR and wrong_nr) for v in verdicts]
        any_wrong += any(bad)
        per_reading = [V.combine(parts[f"{s} vs {b}"].verdict for b in ("B1", "B2"))
                       for s in ("S1", "S2")]
        claim = (R if R in per_reading else NR if all(v == NR for v in per_reading)
                 else INC)
        claim_rep += claim == R
        claim_wrong += (claim == R and wrong_r) or (claim == NR and wrong_nr)
    return {"familywise": any_wrong / SIMS4, "claim_wrong": claim_wrong / SIMS4,
            "claim_reproduced": claim_rep / SIMS4, "counts": (any_wrong, claim_wrong)}


GAP_CASES = {
    "STEP halves the gap (E = 0)": (0.5, {}),
    "STEP at the margin (E = delta)": (0.25, {}),
    "E = 0, STEP-A1 diverges 10%": (0.5, {"S1": 0.1}),
    "power: STEP closes it (E = 1 = 2 delta)": (0.0, {}),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(GAP_CASES))
def test_parts_sharing_runs_with_premise_and_holm(case):
    gap_step, rates = GAP_CASES[case]
    out = _gap_case(case, gap_step, rates)
    _show4(f"C5-shaped 4 parts: {case}", familywise=out["familywise"],
           claim_wrong=out["claim_wrong"], claim_reproduced=out["claim_reproduced"])
    if not case.startswith("power"):
        assert _limit(out["counts"][0]) and _limit(out["counts"][1])


# --- C7: flatness by TOST at 0.98 of the margin, landing, two Holm families ------------

def _c7_case(case: str, c_a1: float, landing: dict) -> dict:
    """Two readings x 5 fractions: reading A1's error at f = 0.1 is shifted by ``c_a1``
    points (deviation 0.8 c_a1 from the mean over fractions; the others -0.2 c_a1), SR's
    are flat; C7's own ``_landing`` on simulated switch rows (fired with rate
    ``landing['fired']``, fraction ~ N(0.2, 0.03); a seed that did not fire switches at its
    window, 0.2 of T); all 14 parts through ``decide_equivalence(..., others=landing)``."""
    from stepsim.checks import c07_switch_fraction as c07

    draw = _world(f"c7 {case}")
    rng = _rng(f"c7 landing {case}")
    fractions = (0.1, 0.2, 0.4, 0.6, 0.8)
    wrong_r = wrong_nr = 0
    counts = {R: 0, NR: 0, INC: 0}
    for _ in range(SIMS4):
        recipes = {f"{r}{f}": (c_a1 if (r == "A1" and f == 0.1) else 0.0, 0.0)
                   for r in ("A1", "SR") for f in fractions}
        views, runs = draw(recipes)
        flat, truths = {}, {}
        shifts = {r: np.array([recipes[f"{r}{f}"][0] for f in fractions]) for r in ("A1", "SR")}
        for r in ("A1", "SR"):
            for j, f in enumerate(fractions):
                terms = [((1.0 if k == j else 0.0) - 0.2, runs[f"{r}{g}"])
                         for k, g in enumerate(fractions)]
                name = f"STEP-{r} flat at f={f:g}"
                flat[name] = _prod_effect(views, terms, name=name)
                truths[name] = abs(shifts[r][j] - shifts[r].mean()) < DELTA - 1e-12
        others = {}
        for r in ("A1", "SR"):
            for scale in (1.0, 0.01):
                fired = rng.random(N_SEEDS) < landing["fired"]
                rows = [{"fraction": float(0.2 + 0.03 * rng.standard_normal()) if x else 0.2,
                         "cause": "fired" if x else "window"} for x in fired]
                name = f"STEP-{r} lands x{scale:g}"
                others[name] = c07._landing(name, rows)
                truths[name] = landing["fired"] > c07.LANDING.fired_rate
        parts = V.decide_equivalence(flat, DELTA, others=others)
        wrong_r += any(p.verdict == R and not truths[n] for n, p in parts.items())
        wrong_nr += any(p.verdict == NR and truths[n] for n, p in parts.items())
        for p in parts.values():
            counts[p.verdict] += 1
    total = SIMS4 * 14
    return {"wrong_R_any_part": wrong_r / SIMS4, "wrong_NR_any_part": wrong_nr / SIMS4,
            "part_R": counts[R] / total, "part_NR": counts[NR] / total,
            "counts": (wrong_r, wrong_nr)}


C7_CASES = {
    # deviation 0.98 delta inside the margin; AutoSwitch fires 85% (the claim holds)
    "inside at 0.98 delta, fired 85%": (0.98 * DELTA / 0.8, {"fired": 0.85}),
    # deviation exactly delta; fired rate exactly the stated 0.5 (the claim fails)
    "outside at delta, fired 50%": (DELTA / 0.8, {"fired": 0.5}),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(C7_CASES))
def test_c7_flatness_and_landing(case):
    c_a1, landing = C7_CASES[case]
    out = _c7_case(case, c_a1, landing)
    _show4(f"C7 14 parts: {case}", wrong_R=out["wrong_R_any_part"],
           wrong_NR=out["wrong_NR_any_part"], part_R=out["part_R"], part_NR=out["part_NR"])
    assert _limit(out["counts"][0]) and _limit(out["counts"][1])


# --- S1, the successors comparison (PROTOCOL "S1"): its decision code end to end ----------

SIMS_S1 = 150  # x 2 N:M families per simulation; small: the suite's budget
# Measured once at SIMS_S1 = 2000 (2026-11-26, 186 s): a wrong reading in 187 of 4000 N:M
# families (4.68%, 95% Clopper-Pearson [4.04%, 5.38%]) and a wrong line in 1 of 2000.


def _s1_case(shift_of: dict) -> dict:
    """S1's ``decide_claim`` (the real code) on simulated per-item views of every run of
    its digits budget (8 seeds, 1:8 and 1:16: two Holm families of 7 parts): shift_of,
    recipe key -> its error shift over SR-STE in points (default 0: equal)."""
    import dataclasses

    from stepsim.checks import budget as budget_module
    from stepsim.checks import protocol
    from stepsim.checks import s01_successors as s1

    b = budget_module.Budget("full", "digits", "main", tuple(range(N_SEEDS)))
    s1.jobs(b)
    b = dataclasses.replace(b, lrs={k: 1e-3 for k in b.needed})
    groups = s1.groups(b)
    draw = _world("S1 " + json.dumps(shift_of, sort_keys=True))
    wrong_parts = wrong_line = 0
    for _ in range(SIMS_S1):
        views = {}
        for nm in s1.nms(b):
            names = {key: (shift_of.get(key, 0.0), 0.0) for key in s1.recipes()}
            names["dense"] = (-1.0, 0.0)
            sim, runs = draw(names)
            for key, group in runs.items():
                specs = groups[(key, None if key == "dense" else nm)]
                for spec, run in zip(specs, group):
                    views.setdefault(spec.digest, sim[run.digest])
        result = s1.decide_claim(b, views)
        for label in (protocol.nm_label(nm) for nm in s1.nms(b)):
            rows = result.numbers["table"][label]
            wrong_parts += any(
                row["vs_baseline"]["verdict"] != INC and shift_of.get(key, 0.0) == 0.0
                for key, row in rows.items() if "vs_baseline" in row)
        wrong_line += result.verdict != INC and not shift_of
    return {"familywise": wrong_parts / (2 * SIMS_S1), "line": wrong_line / SIMS_S1,
            "counts": (wrong_parts, wrong_line)}


def test_s1_every_recipe_equal_to_srste():
    """Truth: every recipe as good as SR-STE. Any "better" or "worse" reading in an N:M's
    Holm family is wrong (family-wise <= 5%), and so is any line verdict but INCONCLUSIVE."""
    out = _s1_case({})
    _show4("S1 7 parts x 2 N:M, all equal", familywise=out["familywise"], line=out["line"])
    assert _limit(out["counts"][0], 2 * SIMS_S1) and _limit(out["counts"][1], SIMS_S1)
