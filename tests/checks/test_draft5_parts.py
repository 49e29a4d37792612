"""Draft 5's part decisions (PROTOCOL.md D5.4, D5.8) on hand-made effects: two
directions, premises at the margin and harm, the bootstrap guard, one-sided McNemar."""

from __future__ import annotations

import math

import pytest

from stepsim import stats
from stepsim.checks import protocol
from stepsim.checks import verdict as V
from stepsim.checks.part_decisions import DISAGREE, HARM, NO_GAP, decide_both_ways, k_of

R5 = protocol.TYPED[5]
R, NR, INC = V.REPRODUCED, V.NOT_REPRODUCED, V.INCONCLUSIVE


def eff(values, name="e", margin=0.5, var=1e-4, divergence=None):
    e = V.effect_from(values, name=name, units="points", margin=margin, shared_test_var=var,
                      test_df=898)
    if divergence is not None:
        import dataclasses

        e = dataclasses.replace(e, divergence=divergence)
    return e


def lost(values, *, seeds, only_plus=0, only_minus=0, both=0, name="e"):
    """An effect over the finite seeds ``values`` whose runs diverged in the other seeds:
    ``only_plus`` seeds only on the worse-claimed side, ``only_minus`` only on the better-
    claimed side, ``both`` on both."""
    finite = list(range(len(values)))
    record = {"seeds": seeds, "finite": finite, "plus": only_plus + both,
              "minus": only_minus + both, "only_plus": only_plus, "only_minus": only_minus,
              "both": both, "runs": {"plus": [only_plus + both, seeds],
                                     "minus": [only_minus + both, seeds]}}
    assert len(values) + only_plus + only_minus + both == seeds
    if len(values) >= 2:
        return eff(values, name=name, divergence=record)
    return V.Effect(name=name, estimate=math.nan, ci_low=math.nan, ci_high=math.nan,
                    ci_level=0.95, n=len(values), units="points", margin=0.5,
                    values=tuple(values), divergence=record)


BIG = [2.1, 1.9, 2.3, 2.0, 1.8, 2.2, 2.05, 1.95]
SMALL = [0.1, 0.12, 0.08, 0.11, 0.09, 0.1, 0.1, 0.1]  # 0 < E < delta, tight
NOISE = [0.1, -0.3, 0.2, -0.1, 0.3, -0.2, 0.0, 0.05]


def decide(parts, k=1):
    return decide_both_ways(parts, k=k, rules=R5)


def test_k_is_lr_readings_times_step_readings_for_a_claim_about_step():
    assert [k_of(c, R5) for c in ("C1", "C3", "C4", "C5", "C7", "C8", "C9", "C10")] == \
        [1, 1, 4, 4, 4, 4, 4, 1]


def test_reproduced_at_alpha_over_k_one_sided_with_the_bootstrap_beside():
    for k in (1, 4):
        part = decide({"big": V.Evidence(eff(BIG))}, k=k)["big"]
        assert part.verdict == R and part.level == pytest.approx(1 - 2 * 0.05 / k)
        est = V.estimate_of(eff(BIG))
        assert part.effect.ci_low == pytest.approx(est.lower_bound(0.05 / k))
        low, high = part.bootstrap
        boot = stats.paired_bootstrap(BIG, se_test=est.se_test, seed=R5.intervals.bootstrap.seed,
                                      name="big", resamples=R5.intervals.bootstrap.resamples)
        assert (low, high) == boot.interval(1 - 2 * 0.05 / k) and low > 0
        assert f"alpha/{k}" in part.reason and "bootstrap" in part.reason


def test_an_effect_shown_smaller_than_delta_is_not_reproduced_even_above_zero():
    parts = decide({"small": V.Evidence(eff(SMALL)), "big": V.Evidence(eff(BIG))}, k=4)
    small = parts["small"]
    assert small.effect.estimate > 0 and small.verdict == NR
    assert "ruled out" in small.reason and small.effect.ci_high < 0.5
    # one Holm family over both parts: the smaller p first at alpha / 2
    assert small.level == pytest.approx(1 - 2 * 0.05 / 2)


def test_the_not_reproduced_family_spans_every_part_given():
    """Holm over n parts: a part near the margin is NOT REPRODUCED alone, not among many."""
    edge = eff([0.2, 0.25, 0.3, 0.15, 0.2, 0.22, 0.18, 0.28], var=0.02)
    est = V.estimate_of(edge)
    assert est.p_less(0.5) < 0.05 and est.p_less(0.5) > 0.05 / 12
    assert decide({"edge": V.Evidence(edge)})["edge"].verdict == NR
    many = {f"noise{i}": V.Evidence(eff(NOISE, var=0.2)) for i in range(11)}
    many["edge"] = V.Evidence(edge)
    assert decide(many)["edge"].verdict == INC


def test_premise_at_the_margin_no_gap_and_harm_shown():
    gap = eff([0.3, 0.4, 0.2, 0.35, 0.3, 0.25, 0.3, 0.3], name="gap(b)")  # 0 < gap < delta
    assert V.premise_present(gap)  # draft 4's gate at 0 would let it through
    worse = eff([1.0, 1.1, 0.9, 1.2, 1.0, 0.95, 1.05, 1.0], name="e(STEP) - e(b)")
    neutral = eff(NOISE, name="e(STEP) - e(b)", var=0.05)
    parts = decide({"harm": V.Evidence(eff(NOISE), gap, "b's gap", harm=worse),
                    "none": V.Evidence(eff(NOISE), gap, "b's gap", harm=neutral),
                    "no harm given": V.Evidence(eff(NOISE), gap, "b's gap")})
    assert parts["harm"].verdict == NR and parts["harm"].reason.startswith(HARM)
    assert NO_GAP in parts["harm"].reason and parts["harm"].absent
    assert parts["none"].verdict == INC and parts["none"].reason.startswith(NO_GAP)
    assert "harm not shown" in parts["none"].reason
    assert parts["no harm given"].verdict == INC and parts["no harm given"].absent
    assert "gap(b) = 0.3 points" in parts["none"].reason and "<= 0.5" in parts["none"].reason
    # a gap beyond the margin: the premise is present and the part is judged on E
    wide = eff([1.3, 1.4, 1.2, 1.35, 1.3, 1.25, 1.3, 1.3], name="gap(b)")
    present = decide({"p": V.Evidence(eff(BIG), wide, "b's gap", harm=worse)})["p"]
    assert present.verdict == R and not present.absent


def test_some_premise_of_several_each_at_alpha_over_their_number():
    """C1: SR-STE's gap under some optimizer: either premise, each at alpha / 2."""
    weak = eff([0.3, 0.4, 0.2, 0.35, 0.3, 0.25, 0.3, 0.3], name="gap sgdm")
    strong = eff([1.3, 1.4, 1.2, 1.35, 1.3, 1.25, 1.3, 1.3], name="gap adam")
    assert decide({"x": V.Evidence(eff(BIG), (weak, strong), "some gap")})["x"].verdict == R
    assert decide({"x": V.Evidence(eff(BIG), (weak, weak), "some gap")})["x"].absent
    # the Bonferroni level: a premise whose bound clears the margin at alpha but not at
    # alpha / 2 is absent among two
    edge = eff([0.7, 0.5, 0.6, 0.75, 0.55, 0.65, 0.6, 0.58], name="gap", var=0.003)
    est = V.estimate_of(edge)
    assert est.lower_bound(0.05) > 0.5 >= est.lower_bound(0.025)
    assert not decide({"x": V.Evidence(eff(BIG), edge, "gap")})["x"].absent
    assert decide({"x": V.Evidence(eff(BIG), (edge, weak), "gap")})["x"].absent


def test_a_gate_is_a_premise_the_statistics_cannot_test():
    part = decide({"x": V.Evidence(eff(BIG), gate="dense not converged")})["x"]
    assert part.verdict == INC and part.absent
    assert part.reason == "premise absent: dense not converged"


def test_the_intervals_must_agree():
    """Bimodal seeds: where t and the bootstrap decide differently the part is
    INCONCLUSIVE and says both."""
    t_only = [2.2] * 7 + [-3.75]  # one seed collapses the other way: t's bound > 0 only
    boot_only = [0.2] * 7 + [3.0]  # one seed far up: the bootstrap's bound > 0 only
    parts = decide({"t only": V.Evidence(eff(t_only)), "boot only": V.Evidence(eff(boot_only))})
    for name in parts:
        assert parts[name].verdict == INC and parts[name].reason.startswith(DISAGREE), name
    assert "t: REPRODUCED" in parts["t only"].reason
    assert "t: undecided" in parts["boot only"].reason
    assert "REPRODUCED bootstrap" in parts["boot only"].reason


def test_divergence_one_sided_each_way():
    """Every seed discordant one way: the worse-claimed side diverging more reproduces the
    claim at alpha / K (2^-8 <= 0.05 / 4); the better-claimed side diverging more is NOT
    REPRODUCED through the Holm family."""
    worse = lost([], seeds=8, only_plus=8)
    better = lost([], seeds=8, only_minus=8)
    parts = decide({"worse": V.Evidence(worse), "better": V.Evidence(better)}, k=4)
    assert parts["worse"].verdict == R and "worse-claimed side diverged" in parts["worse"].reason
    assert parts["better"].verdict == NR
    assert "better-claimed side diverged more often" in parts["better"].reason
    # 16 seeds after the extension, all discordant: p = 2^-16
    sixteen = decide({"x": V.Evidence(lost([], seeds=16, only_plus=16))}, k=4)["x"]
    assert sixteen.verdict == R and "p = 1.53e-05" in sixteen.reason
    # 3 of 8 discordant one way cannot reach 0.05/4: undecided
    few = decide({"x": V.Evidence(lost([1.0, -0.5, 2.0, 0.3, 1.5], seeds=8, only_plus=3))},
                 k=4)["x"]
    assert few.verdict == INC


def test_a_part_whose_error_says_not_reproduced_is_not_saved_by_divergence():
    e = lost(SMALL[:6], seeds=8, only_plus=2)  # finite pairs: E shown below delta
    part = decide({"x": V.Evidence(e)})["x"]
    assert part.verdict == NR and "ruled out" in part.reason


def test_band_parts_by_two_one_sided_tests():
    flat = eff([0.05, -0.1, 0.02, 0.0, 0.1, -0.05, 0.03, 0.01])
    off = eff([1.5, 1.4, 1.6, 1.5, 1.45, 1.55, 1.5, 1.5])
    parts = decide({"flat": V.Evidence(flat, kind="band"), "off": V.Evidence(off, kind="band")},
                   k=4)
    assert parts["flat"].verdict == R and "inside (-0.5, 0.5)" in parts["flat"].reason
    assert parts["flat"].level == pytest.approx(1 - 2 * 0.05 / 4)
    assert parts["off"].verdict == NR and "outside" in parts["off"].reason


def test_directional_parts_join_both_directions():
    seen = {}

    def record(rep, not_rep):
        seen["rep"], seen["not_rep"] = rep, not_rep
        return V.Part("landing", eff(BIG), R if rep[1] else INC, "landing", 1 - 2 * rep[0])

    spec = V.Directional(p_reproduced=0.001, p_not_reproduced=0.9, decide=record)
    part = decide({"landing": spec, "e": V.Evidence(eff(NOISE))}, k=4)["landing"]
    assert part.verdict == R and seen["rep"] == (0.05 / 4, True)
    assert seen["not_rep"][1] is False


def test_decided_parts_pass_through_and_bad_input_is_refused():
    fixed = V.Part("p", eff(BIG), INC, "diverged: no v to read", 0.95)
    assert decide({"p": fixed})["p"] is fixed
    with pytest.raises(TypeError, match="Evidence, Directional or Part"):
        decide({"p": eff(BIG)})
    with pytest.raises(ValueError, match="k must be"):
        decide_both_ways({}, k=0, rules=R5)
    with pytest.raises(ValueError, match="kind"):
        V.Evidence(eff(BIG), kind="sideways")
    with pytest.raises(TypeError, match="premise"):
        V.Evidence(eff(BIG), premise=(eff(BIG), "not an effect"))


def test_negated_mirrors_the_effect_and_swaps_the_sides():
    e = lost([0.5, 0.7, 0.6], seeds=5, only_plus=2)
    h = V.negated(e, "h")
    assert (h.estimate, h.ci_low, h.ci_high) == (-e.estimate, -e.ci_high, -e.ci_low)
    assert h.values == tuple(-v for v in e.values) and h.name == "h"
    assert (h.divergence["only_minus"], h.divergence["only_plus"]) == (2, 0)
    assert V.negated(h, "e").divergence == e.divergence
