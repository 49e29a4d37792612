"""When a run may switch is decided in one place (stepsim._ground.switch_steps): the clipped
AutoSwitch criterion, the protocol and the checks' ``switch_cause`` agree on it."""

from __future__ import annotations

import math
from typing import NamedTuple

import pytest

from stepsim._ground.switch_steps import CLIP_BOUNDS, fraction_to_step, legal_switch_steps
from stepsim.checks import protocol
from stepsim.checks.budget import switch_cause
from stepsim.recipes.criteria import AutoSwitch


class _Stats(NamedTuple):  # what AutoSwitch's variant I reads of one step's AdamStats
    dv_l1: float
    size: int


PASS, FAIL = _Stats(0.0, 1), _Stats(1.0, 1)  # Z = 0 < eps: the test passes; Z = 1: it fails


#: fractions a user may give (``-c t_min=0.29``) whose products with some T fall just below
#: an integer in floating point (0.29 x 100 = 28.999999999999996), where a plain floor
#: disagrees with the criterion; the protocol's own fractions have no such T in 100..5000
USER_FRACTIONS = (0.29, 0.35, 0.7)


def _protocol_fractions() -> list[float]:
    """Every fraction of the run the protocol names: the clip, C7's fixed fractions and its
    landing interval (and :data:`USER_FRACTIONS`)."""
    r = protocol.RULES
    return sorted({*r.clip, *r.c7_fractions, *r.c7_landing.interval,
                   *USER_FRACTIONS})


def _pairs() -> list[tuple[float, float]]:
    """(t_min, t_max) clips in which every protocol fraction is once the lower and once the
    upper bound: consecutive fractions, (0, smallest), (largest, 1) and the protocol's own."""
    f = [0.0, *_protocol_fractions(), 1.0]
    return sorted({*zip(f, f[1:]), tuple(protocol.RULES.clip)})


def _fires_at(crit: AutoSwitch, state, step: int, stats) -> bool:
    """Does ``crit`` fire at ``step`` when step - 1 steps went by without firing? With a
    one-step window the criterion's decision depends only on this step's sample and the
    clip, so the state may jump to step - 1 (the criterion's own update code decides)."""
    return crit.update(state._replace(step=step - 1), step, stats)[1]


def _first_firing(crit, state, stats, near: float) -> int:
    """The criterion's first firing step, searched from just below ``near`` (where it must
    not fire yet) upwards."""
    start = max(1, math.floor(near) - 1)
    for k in range(start, start + 5):
        if _fires_at(crit, state, k, stats):
            assert k > start or start == 1, f"fired at {k}, searched from {start}: too late"
            return k
    raise AssertionError(f"criterion did not fire near step {near}")


def test_the_protocol_and_the_criterion_read_the_one_clip():
    assert tuple(protocol.RULES.clip) == CLIP_BOUNDS == AutoSwitch(clip=True).bounds()


def test_switch_cause_agrees_with_the_criterion_at_every_run_length_and_protocol_fraction():
    """T in 100..5000, every clip from the protocol's fractions: the step switch_cause calls
    "window" is where a passing test first fires; the one it calls "clip" is where the
    failing test is forced; and the steps either side are called otherwise."""
    checked = 0
    for lo, hi in _pairs():
        crit = AutoSwitch(clip=True, t_min=lo, t_max=hi, window_length=1)
        for steps in range(100, 5001):
            state = crit.init(steps)
            first = _first_firing(crit, state, PASS, lo * steps)
            forced = _first_firing(crit, state, FAIL, hi * steps)

            def cause(k, steps=steps, lo=lo, hi=hi):
                return switch_cause(k, steps, 1, clip=True, bounds=(lo, hi))

            assert cause(forced) == "clip", (lo, hi, steps, forced)
            assert cause(forced - 1) != "clip" and cause(forced + 1) != "clip"
            if first != forced:
                assert cause(first) == "window", (lo, hi, steps, first)
            assert cause(first - 1) != "window" and cause(first + 1) != "window"
            assert (first, forced) == legal_switch_steps(steps, 1, clip=True, t_min=lo,
                                                         t_max=hi)
            checked += 1
    assert checked == len(_pairs()) * 4901


def test_switch_cause_names_the_step_math_floor_got_wrong():
    """0.29 x 100 is 28.999999999999996 in floating point: the criterion's first legal step
    is 30 (k > 29), where a plain floor put it at 29."""
    assert math.floor(0.29 * 100) + 1 == 29  # the old computation
    crit = AutoSwitch(clip=True, t_min=0.29, window_length=1)
    state = crit.init(100)
    assert not _fires_at(crit, state, 29, PASS) and _fires_at(crit, state, 30, PASS)
    assert switch_cause(30, 100, 1, clip=True, bounds=(0.29, 0.5)) == "window"
    assert switch_cause(29, 100, 1, clip=True, bounds=(0.29, 0.5)) == "fired"


@pytest.mark.parametrize("steps, window", [(1000, 100), (2000, 1000), (2000, 100)])
def test_switch_cause_agrees_with_a_criterion_run_step_by_step_with_its_full_window(steps,
                                                                                   window):
    """The real window (nothing fires before T_w samples), fed every step from 1."""
    crit = AutoSwitch(clip=True, window_length=window)
    for stats, expected in ((PASS, "window"), (FAIL, "clip")):
        state, k = crit.init(steps), 0
        fired = False
        while not fired:
            k += 1
            state, fired = crit.update(state, k, stats)
        assert switch_cause(k, steps, window, clip=True) == expected, (steps, window, k)
    unclipped = AutoSwitch(window_length=window)
    state, k, fired = unclipped.init(steps), 0, False
    while not fired:
        k += 1
        state, fired = unclipped.update(state, k, PASS)
    assert k == window and switch_cause(k, steps, window, clip=False) == "window"


def test_fraction_to_step_lives_once():
    from stepsim.recipes import criteria, switch

    assert criteria.fraction_to_step is switch.fraction_to_step is fraction_to_step
    assert fraction_to_step(0.29, 100) == 29 and fraction_to_step(0.555, 100) == 56
