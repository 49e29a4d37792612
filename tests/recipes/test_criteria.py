"""Switch criteria (SPEC section 4): each fires at a step known in closed form.

The trajectories are hand-made so that the answer is a formula: geometric differences
|v_k - v_{k-1}| = a r^k make AutoSwitch's window mean a geometric sum; powers of k make
Agarwal's relative change and Tang's ratio solvable for k.
"""

import dataclasses
import math
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepsim.core.optim import AdamStats
from stepsim.recipes.analysis import Table1Score, run_criteria_on_v, table1_score
from stepsim.recipes.criteria import (
    CRITERIA,
    Agarwal,
    AutoSwitch,
    FixedFraction,
    FixedStep,
    RingMean,
    Tang,
    make_criterion,
    window_length,
)

EPS = 1e-8


# ------------------------------------------------------------------------- helpers


def geometric_v(amplitudes, r, steps):
    """(v, v0): v_1..v_steps with |v_k,i - v_{k-1},i| = amplitudes[i] * r**k for k >= 1.

    Even coordinates rise from v_0 = 0; odd ones fall from v_0 = start, high enough to
    stay >= 0, so the differences have both signs (AutoSwitch must take |.|). A zero
    amplitude is a dead coordinate: v stays 0, every difference is exactly 0.
    """
    k = np.arange(1, steps + 1)[:, None]
    amp = np.asarray(amplitudes, dtype=np.float64)[None, :]
    rise = np.cumsum(amp * r**k, axis=0)
    sign = np.where(np.arange(amp.size) % 2 == 0, 1.0, -1.0)[None, :]
    start = np.where(sign < 0, 2.0 * amp * r / (1 - r), 0.0)  # > total fall
    v = start + sign * rise
    v[:, amp[0] == 0] = 0.0
    return v, start[0]


def full_window_step(a, r, tw, eps=EPS):
    """First k >= tw with mean(a r^j, j = k-tw+1..k) < eps, in closed form.

    mean = a r^(k-tw+1) C with C = (1 - r^tw) / (tw (1 - r)); it is < eps iff
    (k - tw + 1) > L = log(eps / (a C)) / log r, so k = tw + floor(L) (or tw if L < 0).
    Refuses knife-edge cases so that rounding cannot decide the test.
    """
    c = (1 - r**tw) / (tw * (1 - r))
    big_l = math.log(eps / (a * c)) / math.log(r)
    if big_l < 0:
        return tw
    frac = big_l - math.floor(big_l)
    assert 0.02 < frac < 0.98, f"test parameters too close to the threshold (L={big_l})"
    return tw + math.floor(big_l)


def stats_from_z(z, size=4):
    """AdamStats whose Option-I sample is z (all coordinates changed by z)."""
    return AdamStats(dv_l1=z * size, dv_log_sum=size * math.log(z) if z > 0 else math.nan,
                     dv_zeros=0 if z > 0 else size, v_l1=1.0, v_l2sq=1.0, size=size)


def feed(criterion, stats_list, total_steps=None):
    state = criterion.init(total_steps or len(stats_list))
    for k, s in enumerate(stats_list, start=1):
        state, _ = criterion.update(state, k, s)
    return state


# ------------------------------------------------------------------------- T_w


def test_window_length_robust_floor():
    assert int(1 / (1 - 0.999)) == 999  # the trap the robust floor avoids
    assert window_length(0.999) == 1000
    assert window_length(0.99) == 100
    assert window_length(0.9) == 10
    assert window_length(0.9985) == 666  # 666.67: a real floor
    assert window_length(0.3) == 1  # 1.43
    assert window_length(0.5) == 2
    assert AutoSwitch().window_steps == 1000
    assert Tang().window_steps == 1000
    assert AutoSwitch(window_length=999).window_steps == 999


@pytest.mark.parametrize("beta2", [0.0, 1.0, -0.1, 1.5])
def test_window_length_refuses_bad_beta2(beta2):
    with pytest.raises(ValueError, match="beta2"):
        window_length(beta2)
    with pytest.raises(ValueError, match="beta2"):
        AutoSwitch(beta2=beta2)
    with pytest.raises(ValueError, match="beta2"):
        Tang(beta2=beta2)


# ------------------------------------------------------------------ AutoSwitch, closed form


def test_geometric_helper_has_the_intended_differences():
    v, v0 = geometric_v([1e-3, 1e-3, 0.0], 0.8, 30)
    dv = np.diff(np.vstack([v0, v]), axis=0)
    k = np.arange(1, 31)
    np.testing.assert_allclose(dv[:, 0], 1e-3 * 0.8**k, rtol=1e-9)
    np.testing.assert_allclose(dv[:, 1], -1e-3 * 0.8**k, rtol=1e-9)
    assert np.all(dv[:, 2] == 0)
    assert np.all(v >= 0)


def _run_geometric(amplitudes, r, steps, criterion):
    """run_criteria_on_v on geometric_v, from its v_0."""
    v, v0 = geometric_v(amplitudes, r, steps)
    return run_criteria_on_v(v, criterion, v0=v0)


@pytest.mark.parametrize("a", [1e-3, 2e-5])
def test_autoswitch_option1_fires_at_closed_form_step(a):
    r, tw = 0.8, 10
    expected = full_window_step(a, r, tw)
    state = _run_geometric([a, a], r, expected + 20, AutoSwitch(beta2=0.9))
    assert state.fired_at == expected
    # the window mean it fired on is the closed form, and is below eps (one step earlier not)
    c = (1 - r**tw) / (tw * (1 - r))
    assert state.value == pytest.approx(a * r ** (expected - tw + 1) * c, rel=1e-8)
    assert state.value < EPS <= a * r ** (expected - tw) * c


def test_autoswitch_option1_paper_default_window_1000():
    a, r, tw = 1e-5, 0.995, 1000
    expected = full_window_step(a, r, tw)
    assert expected > tw  # the window fills before the mean crosses eps
    state = _run_geometric([a, a], r, expected + 5, AutoSwitch())  # beta2 = 0.999
    assert state.fired_at == expected


def test_autoswitch_option2_is_geometric_mean_and_differs_from_option1():
    a, b, r, tw = 1e-3, 1e-3 / 16, 0.8, 10
    exp_i = full_window_step((a + b) / 2, r, tw)
    exp_ii = full_window_step(math.sqrt(a * b), r, tw)
    assert exp_ii < exp_i  # geometric mean < arithmetic mean: Option II fires earlier
    states = _run_geometric([a, b], r, exp_i + 10, {
        "I": AutoSwitch(beta2=0.9, variant="I"),
        "II": AutoSwitch(beta2=0.9, variant="II"),
    })
    assert states["I"].fired_at == exp_i
    assert states["II"].fired_at == exp_ii
    assert AutoSwitch(variant="II").needs_log and not AutoSwitch().needs_log


def test_option2_zero_rules_on_a_dead_coordinate():
    a, r, tw = 1e-3, 0.8, 10
    amps = [a, a, 0.0]  # third coordinate: v stays 0, every difference exactly 0
    steps = 80
    rules = {
        "skip": AutoSwitch(beta2=0.9, variant="II", zero_rule="skip"),
        "zero": AutoSwitch(beta2=0.9, variant="II", zero_rule="zero"),
        "zero-partial": AutoSwitch(beta2=0.9, variant="II", zero_rule="zero", window="partial"),
        "floor": AutoSwitch(beta2=0.9, variant="II", zero_rule="floor"),
        "floor-1e-4": AutoSwitch(beta2=0.9, variant="II", zero_rule="floor", zero_floor=1e-4),
        "option-I": AutoSwitch(beta2=0.9, variant="I"),
    }
    states = _run_geometric(amps, r, steps, rules)
    # skip: the geometric mean of the two live coordinates, a r^k
    assert states["skip"].fired_at == full_window_step(a, r, tw)
    # zero: every Z_k = 0, so it fires as soon as the window is full (or at once if partial)
    assert states["zero"].fired_at == tw
    assert states["zero-partial"].fired_at == 1
    # floor f: Z_k = ((a r^k)^2 f)^(1/3) = a^(2/3) f^(1/3) (r^(2/3))^k
    for label, f in [("floor", EPS), ("floor-1e-4", 1e-4)]:
        expected = full_window_step(a ** (2 / 3) * f ** (1 / 3), r ** (2 / 3), tw)
        assert states[label].fired_at == expected, label
    assert states["floor-1e-4"].fired_at > states["skip"].fired_at  # a high floor delays
    # Option I averages the zero in arithmetically: Z_k = (2/3) a r^k
    assert states["option-I"].fired_at == full_window_step(2 * a / 3, r, tw)


def test_option2_all_zero_differences():
    frozen = AdamStats(dv_l1=0.0, dv_log_sum=0.0, dv_zeros=5, v_l1=1.0, v_l2sq=1.0, size=5)
    for rule in ("skip", "zero"):
        assert AutoSwitch(variant="II", zero_rule=rule).sample(frozen) == 0.0
    # the floor rule counts every zero as the floor, so all zeros give the floor exactly
    assert AutoSwitch(variant="II", zero_rule="floor").sample(frozen) == EPS
    assert AutoSwitch(variant="II", zero_rule="floor", zero_floor=1e-3).sample(frozen) == 1e-3


@given(
    log_mean=st.floats(-60.0, -5.0),
    zeros=st.integers(1, 50),
    live=st.integers(1, 50),
)
def test_floor_at_eps_never_changes_the_per_sample_decision(log_mean, zeros, live):
    # With zero_floor = eps, a zero pulls Z towards eps but never across it.
    stats = AdamStats(dv_l1=1.0, dv_log_sum=log_mean * live, dv_zeros=zeros, v_l1=1.0,
                      v_l2sq=1.0, size=zeros + live)
    z_skip = AutoSwitch(variant="II", zero_rule="skip").sample(stats)
    z_floor = AutoSwitch(variant="II", zero_rule="floor").sample(stats)
    if abs(math.log(z_skip / EPS)) > 1e-9:  # not on the threshold itself
        assert (z_skip < EPS) == (z_floor < EPS)
        assert min(z_skip, EPS) <= z_floor * (1 + 1e-12)
        assert z_floor <= max(z_skip, EPS) * (1 + 1e-12)


def test_option2_without_log_stats_is_an_error():
    no_log = AdamStats(dv_l1=1.0, dv_log_sum=math.nan, dv_zeros=0, v_l1=1.0, v_l2sq=1.0, size=2)
    crit = AutoSwitch(variant="II")
    with pytest.raises(ValueError, match="log_stats=True"):
        crit.update(crit.init(10), 1, no_log)


def test_partial_and_full_windows_differ_where_they_should():
    # Z_1 = 4.5e-8, then Z_k = 0: partial mean 4.5e-8 / k < 1e-8 first at k = 5;
    # the full window (T_w = 10) waits for its 10th sample: 4.5e-9.
    v = np.full((30, 1), 4.5e-8)
    states = run_criteria_on_v(v, {
        "full": AutoSwitch(beta2=0.9, window="full"),
        "partial": AutoSwitch(beta2=0.9, window="partial"),
    })
    assert states["partial"].fired_at == 5
    assert states["full"].fired_at == 10
    assert states["full"].value == pytest.approx(4.5e-9, rel=1e-12)


def test_partial_and_full_windows_agree_once_the_window_is_full():
    # a large early change keeps the partial mean above eps until well after T_w
    a, r, tw = 1e-3, 0.8, 10
    expected = full_window_step(a, r, tw)
    states = _run_geometric([a, a], r, expected + 5, {
        "full": AutoSwitch(beta2=0.9, window="full"),
        "partial": AutoSwitch(beta2=0.9, window="partial"),
    })
    assert states["full"].fired_at == states["partial"].fired_at == expected


def test_vhat_versus_raw_v():
    # Adam with a constant g^2 = c: v_k = c (1 - b2^k), so vhat_k = c at every step.
    # vhat: Z_1 = c, then 0: the full window holds c/T_w = 1e-7 > eps at k = 10 and drops
    # to 0 at k = 11. Raw v: |dv_k| = c (1 - b2) b2^(k-1) = a r^k, a = c (1-b2)/b2, r = b2.
    b2, c, tw = 0.9, 1e-6, 10
    k = np.arange(1, 80)
    v = (c * (1 - b2**k))[:, None] * np.ones((1, 3))
    states = run_criteria_on_v(v, {
        "v": AutoSwitch(beta2=b2, stats_on="v"),
        "vhat": AutoSwitch(beta2=b2, stats_on="vhat"),
    }, beta2=b2)
    assert states["vhat"].fired_at == tw + 1
    assert states["v"].fired_at == full_window_step(c * (1 - b2) / b2, b2, tw)


# --------------------------------------------------------------------------- clipping


def _flat_v(steps, d=2):
    return np.zeros((steps, d))  # every Z_k = 0: the test passes as soon as it can


def _moving_v(steps, d=2):
    return np.arange(1, steps + 1, dtype=np.float64)[:, None] * np.ones((1, d))  # Z_k = 1


def test_clipping_t_min_delays_the_switch():
    assert run_criteria_on_v(_flat_v(200), AutoSwitch(beta2=0.9)).fired_at == 10
    for t_min, expected in [(25, 26), (0.1, 21), (5, 10), (0, 10)]:  # T = 200
        crit = AutoSwitch(beta2=0.9, clip=True, t_min=t_min, t_max=150)
        assert run_criteria_on_v(_flat_v(200), crit).fired_at == expected, t_min


def test_clipping_t_max_forces_the_switch():
    assert run_criteria_on_v(_moving_v(200), AutoSwitch(beta2=0.9)).fired_at is None
    cases = [
        (AutoSwitch(beta2=0.9, clip=True, t_min=0, t_max=30), 31),
        (AutoSwitch(beta2=0.9, clip=True), 101),  # defaults: T_max = 0.5 * 200
        (AutoSwitch(beta2=0.9, clip=True, t_min=0, t_max=3), 4),  # before the window fills
        (AutoSwitch(beta2=0.9, clip=True, t_max=200), None),  # T_max = T: never forced
    ]
    for crit, expected in cases:
        assert run_criteria_on_v(_moving_v(200), crit).fired_at == expected, crit


def test_clipping_fractions_resolve_robustly():
    assert 0.29 * 100 < 29  # 28.999999999999996: a naive floor would give T_max = 28
    crit = AutoSwitch(beta2=0.9, clip=True, t_min=0.0, t_max=0.29)
    assert crit.init(100).t_max == 29
    assert run_criteria_on_v(_moving_v(100), crit).fired_at == 30
    # defaults resolve against total_steps
    state = AutoSwitch(clip=True).init(1000)
    assert (state.t_min, state.t_max) == (100, 500)


def test_clipping_errors_name_both_bounds():
    with pytest.raises(ValueError, match=r"t_min \(0.6\).*t_max \(0.5\)"):
        AutoSwitch(clip=True, t_min=0.6)
    with pytest.raises(ValueError, match=r"t_min \(80\).*t_max \(50\)"):
        AutoSwitch(clip=True, t_min=80, t_max=50)
    crit = AutoSwitch(clip=True, t_min=80)  # int vs default fraction: checked at init
    with pytest.raises(ValueError, match=r"t_min \(80 -> step 80\).*t_max \(0.5 -> step 50\)"):
        crit.init(100)
    assert crit.init(200).t_max == 100
    with pytest.raises(ValueError, match="clip=True"):
        AutoSwitch(t_max=0.5)
    for bad in (1.5, -0.1, math.nan):
        with pytest.raises(ValueError, match="t_max"):
            AutoSwitch(clip=True, t_max=bad)
    with pytest.raises(ValueError, match="t_min"):
        AutoSwitch(clip=True, t_min=-3)
    with pytest.raises(TypeError, match="t_min"):
        AutoSwitch(clip=True, t_min="10")


# ----------------------------------------------------------------------------- Agarwal


def _scaled(norms, u=(3.0, 4.0)):
    """v_k = n_k * u: ||v_k||_2 = 5 n_k and ||v_k||_1 = 7 n_k for u = (3, 4)."""
    return np.asarray(norms, dtype=np.float64)[:, None] * np.asarray(u)[None, :]


@pytest.mark.parametrize("norm", ["l2", "l1"])
def test_agarwal_fires_at_closed_form_step(norm):
    # n_k = k^p: relative change (k/(k-1))^p - 1 < 0.5  <=>  k > q/(q-1), q = 1.5^(1/p)
    p = 4
    q = 1.5 ** (1 / p)
    expected = math.floor(q / (q - 1)) + 1
    assert expected == 11
    k = np.arange(1, 40)
    state = run_criteria_on_v(_scaled(k**p), Agarwal(norm=norm))
    assert state.fired_at == expected
    assert state.value == pytest.approx((11 / 10) ** 4 - 1)


def test_agarwal_threshold_option_and_falling_norms():
    # n_k: x0.25 per step (relative change 0.75) for k <= 6, then x0.75 (0.25)
    n = [0.25**k for k in range(1, 7)] + [0.25**6 * 0.75**j for j in range(1, 10)]
    assert run_criteria_on_v(_scaled(n), Agarwal()).fired_at == 7
    assert run_criteria_on_v(_scaled(n), Agarwal(threshold=0.8)).fired_at == 2
    assert run_criteria_on_v(_scaled(n), Agarwal(threshold=0.2)).fired_at is None


def test_agarwal_l1_and_l2_differ():
    # ||v||_2 stays 1 from step 1 to 2 while ||v||_1 doubles; then v stays put.
    v = np.array([[1.0, 0, 0, 0], [0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]])
    assert run_criteria_on_v(v, Agarwal(norm="l2")).fired_at == 2
    assert run_criteria_on_v(v, Agarwal(norm="l1")).fired_at == 3


def test_agarwal_undefined_steps_never_fire():
    # step 1 compares with ||v_0|| = 0; zero norms stay undefined; v_4 = v_3 > 0 fires
    v = _scaled([0.0, 0.0, 1.0, 1.0, 1.0])
    state = Agarwal().init(5)
    fired = []
    for k, row in enumerate(v, start=1):
        s = AdamStats(dv_l1=0.0, dv_log_sum=0.0, dv_zeros=2, v_l1=float(np.abs(row).sum()),
                      v_l2sq=float(row @ row), size=2)
        state, f = Agarwal().update(state, k, s)
        fired.append(f)
        if k <= 3:
            assert math.isnan(state.value)
    assert fired == [False, False, False, True, True]
    assert state.fired_at == 4
    # growing 3x per step never fires
    assert run_criteria_on_v(_scaled(3.0 ** np.arange(20)), Agarwal()).fired_at is None


# -------------------------------------------------------------------------------- Tang


@pytest.mark.parametrize("beta2, tw", [(0.9, 10), (0.99, 100)])
def test_tang_fires_at_closed_form_step(beta2, tw):
    # n_k = k^(-1/2): ratio ((k - tw)/k)^(1/2) > 0.96  <=>  k > tw / (1 - 0.96^2)
    expected = math.floor(tw / (1 - 0.96**2)) + 1
    k = np.arange(1, expected + 20)
    state = run_criteria_on_v(_scaled(k ** -0.5), Tang(beta2=beta2))
    assert state.fired_at == expected
    assert state.value == pytest.approx(math.sqrt((expected - tw) / expected))


def test_tang_piecewise_and_one_sided():
    # halving for 20 steps, then flat: the ratio over T_w = 10 is 0.5^(30 - k) for
    # k in 21..30, first above 0.96 at k = 30
    n = [0.5**k for k in range(1, 21)] + [0.5**20] * 15
    assert run_criteria_on_v(_scaled(n), Tang(beta2=0.9)).fired_at == 30
    assert run_criteria_on_v(_scaled(n), Tang(beta2=0.9, threshold=0.4)).fired_at == 29
    # a growing v passes the one-sided test as soon as v_{k - T_w} exists
    assert run_criteria_on_v(_scaled(np.arange(1, 40.0)), Tang(beta2=0.9)).fired_at == 11
    # always halving: never
    assert run_criteria_on_v(_scaled(0.5 ** np.arange(60.0)), Tang(beta2=0.9)).fired_at is None


def test_tang_undefined_before_window_and_on_zero_norm():
    n = [0.0] * 5 + [1.0] * 20  # ||v_j||_1 = 0 for j <= 5: compare from k = 16
    assert run_criteria_on_v(_scaled(n), Tang(beta2=0.9)).fired_at == 16
    assert run_criteria_on_v(_scaled([1.0] * 10), Tang(beta2=0.9)).fired_at is None
    assert run_criteria_on_v(_scaled([1.0] * 11), Tang(beta2=0.9)).fired_at == 11
    assert run_criteria_on_v(_scaled([1.0] * 11), Tang(window_length=3)).fired_at == 4


# ------------------------------------------------------------------ streaming and memory


def _footprint(state):
    """Number of floats a state holds: scalars count 1, arrays and rings their length."""
    total = 0
    for name in state._fields:
        x = getattr(state, name)
        if isinstance(x, np.ndarray):
            total += x.size
        elif isinstance(x, RingMean):
            total += x.buf.size + 4
        else:
            assert x is None or isinstance(x, (int, float)), (name, type(x))
            total += 1
    return total


@pytest.mark.parametrize("crit", [AutoSwitch(beta2=0.9), AutoSwitch(beta2=0.9, variant="II"),
                                  Tang(beta2=0.9), Agarwal()])
def test_state_memory_is_bounded_by_the_window(crit):
    rng = np.random.default_rng(0)
    state = crit.init(10_000)
    sizes = []
    for k in range(1, 2001):
        z = float(rng.uniform(1.0, 2.0))  # never below eps, ratios never stable: no firing
        s = AdamStats(dv_l1=4 * z, dv_log_sum=4 * math.log(z), dv_zeros=0,
                      v_l1=math.exp(-0.01 * k),  # ratio over 10 steps 0.905 < 0.96
                      v_l2sq=9.0 if k % 2 else 1.0, size=4)  # relative change >= 2/3
        state, _ = crit.update(state, k, s)
        if k in (300, 2000):  # same pickled int widths
            sizes.append((_footprint(state), len(pickle.dumps(state))))
    assert state.fired_at is None
    assert sizes[0] == sizes[1]
    assert sizes[1][0] <= 10 + 10  # T_w floats plus a few scalars


def test_ring_mean_does_not_drift():
    # big samples leave the window; the small ones left must average exactly. The bigs
    # arrive off the ring's phase, so the window is all small for several steps before
    # the next wrap (where the sum is recomputed): the running sum itself must be right.
    rng = np.random.default_rng(1)
    n = 7
    small = rng.uniform(1e-12, 2e-12, 6 * n)
    xs = list(small[:3]) + list(rng.uniform(1e6, 2e6, n)) + list(small[3:])
    ring, naive, naive_err = RingMean.empty(n), 0.0, 0.0
    for j, x in enumerate(xs):
        if j >= n:
            naive -= xs[j - n]
        naive += x
        ring = ring.push(x)
        exact = math.fsum(xs[max(0, j - n + 1):j + 1]) / min(j + 1, n)
        assert ring.mean() == pytest.approx(exact, rel=1e-12, abs=0.0)
        naive_err = max(naive_err, abs(naive / min(j + 1, n) - exact) / exact)
    assert naive_err > 1e-3  # the scenario really defeats a plain running sum


def test_autoswitch_window_mean_is_exact_after_large_samples():
    tw = 10
    zs = [1e3] * tw + [3e-9 + 1e-10 * j for j in range(37)]
    state = feed(AutoSwitch(beta2=0.9), [stats_from_z(z) for z in zs[:tw + 5]])
    assert state.fired_at is None
    state2 = feed(AutoSwitch(beta2=0.9, eps=1e-20), [stats_from_z(z) for z in zs])
    assert state2.value == pytest.approx(math.fsum(zs[-tw:]) / tw, rel=1e-12)
    # and with eps 1e-8 it fires at the first step whose window holds no large sample
    assert feed(AutoSwitch(beta2=0.9), [stats_from_z(z) for z in zs]).fired_at == 2 * tw


# ------------------------------------------------------- streaming equals a batch oracle


def _oracle_autoswitch(z, tw, eps, partial, t_min, t_max):
    """First k (1-based) firing, from the whole sequence at once (obviously right, O(T*T_w))."""
    for k in range(1, len(z) + 1):
        window = z[max(0, k - tw):k]
        mean = math.fsum(window) / len(window) if (partial or k >= tw) else math.nan
        if not math.isnan(mean) and abs(mean / eps - 1) < 1e-9:
            return "tie"
        forced = t_max is not None and k > t_max
        if forced or (mean < eps and (t_min is None or k > t_min)):
            return k
    return None


@given(
    logz=st.lists(st.floats(-9.5, -7.0), min_size=1, max_size=60),
    tw=st.integers(1, 12),
    partial=st.booleans(),
    bounds=st.one_of(st.none(), st.tuples(st.integers(0, 40), st.integers(0, 40))),
)
def test_autoswitch_matches_a_batch_oracle(logz, tw, partial, bounds):
    z = [10.0**u for u in logz]
    t_min, t_max = (None, None) if bounds is None else (min(bounds), max(bounds))
    expected = _oracle_autoswitch(z, tw, EPS, partial, t_min, t_max)
    if expected == "tie":
        return
    crit = AutoSwitch(window_length=tw, window="partial" if partial else "full",
                      clip=bounds is not None, t_min=t_min, t_max=t_max)
    assert feed(crit, [stats_from_z(x) for x in z]).fired_at == expected


@given(
    # (AdamStats carries ||v||_2^2, which underflows for float64 v below ~1e-154)
    norms=st.lists(st.one_of(st.just(0.0), st.floats(1e-6, 10.0)), min_size=1, max_size=40),
    tw=st.integers(1, 8),
)
def test_agarwal_and_tang_match_batch_oracles(norms, tw):
    n = np.asarray(norms)

    def first(pred):
        hits = [k for k in range(1, n.size + 1) if pred(k)]
        return hits[0] if hits else None

    l2 = np.sqrt(n * n)  # as AdamStats.v_l2 computes it (may differ from n by an ulp)

    def rel(k):
        return k >= 2 and l2[k - 2] > 0 and abs(l2[k - 1] - l2[k - 2]) / l2[k - 2] < 0.5

    def ratio(k):
        return k > tw and n[k - 1 - tw] > 0 and n[k - 1] / n[k - 1 - tw] > 0.96

    v = n[:, None] * np.ones((1, 1))  # one coordinate: both norms are n_k
    states = run_criteria_on_v(v, {"a": Agarwal(), "t": Tang(window_length=tw)})
    assert states["a"].fired_at == first(rel)
    assert states["t"].fired_at == first(ratio)


# -------------------------------------------------------------------- interface details


def test_defaults_are_the_papers_reading():
    c = AutoSwitch()
    assert (c.variant, c.beta2, c.eps, c.window, c.stats_on, c.clip) == (
        "I", 0.999, 1e-8, "full", "v", False)
    assert c.zero_rule == "skip" and c.zero_floor is None
    assert (Agarwal().threshold, Agarwal().norm) == (0.5, "l2")
    assert (Tang().threshold, Tang().beta2) == (0.96, 0.999)


def test_runner_vhat_starts_from_zero():
    # vhat_0 = 0 whatever v_0 is (as adam_step): Z_1 = mean |v_1 / (1 - b2)|
    v = np.full((3, 2), 0.5)
    state = run_criteria_on_v(v, AutoSwitch(beta2=0.9, stats_on="vhat", window="partial"),
                              v0=np.ones(2), beta2=0.9)
    assert state.fired_at is None
    assert state.window.buf[0] == pytest.approx(5.0)
    raw = run_criteria_on_v(v, AutoSwitch(beta2=0.9, window="partial"), v0=np.ones(2))
    assert raw.window.buf[0] == pytest.approx(0.5)


def test_fired_is_one_way_and_ignores_stats_after():
    crit = AutoSwitch(beta2=0.9)
    state = feed(crit, [stats_from_z(0.0)] * 10)
    assert state.fired_at == 10
    for k in (11, 12):
        state, fired = crit.update(state, k, None)  # v frozen, no stats needed
        assert fired and state.fired_at == 10


def test_steps_must_be_fed_in_order():
    for crit in (AutoSwitch(beta2=0.9), Agarwal(), Tang(beta2=0.9)):
        state = crit.init(10)
        with pytest.raises(ValueError, match="step 2 fed after step 0"):
            crit.update(state, 2, stats_from_z(1.0))
        state, _ = crit.update(state, 1, stats_from_z(1.0))
        with pytest.raises(ValueError, match="step 1 fed after step 1"):
            crit.update(state, 1, stats_from_z(1.0))


def test_non_finite_sample_is_an_error():
    crit = AutoSwitch()
    bad = AdamStats(dv_l1=math.inf, dv_log_sum=0.0, dv_zeros=0, v_l1=1.0, v_l2sq=1.0, size=2)
    with pytest.raises(ValueError, match="non-finite"):
        crit.update(crit.init(5), 1, bad)


def test_never_fires_reports_none():
    v = _moving_v(50)
    states = run_criteria_on_v(v, {
        "as": AutoSwitch(beta2=0.9), "as2": AutoSwitch(beta2=0.9, variant="II"),
        "fixed": FixedStep(k0=51),
    })
    assert all(s.fired_at is None for s in states.values())


def test_fixed_criteria_through_the_runner():
    v = _moving_v(20)
    states = run_criteria_on_v(v, {"step": FixedStep(k0=7), "frac": FixedFraction(0.25)})
    assert states["step"].fired_at == 7
    assert states["frac"].fired_at == 5


def test_agrees_with_the_fused_adam_kernel():
    # the same run fed by adam_step's own statistics, and by the recorded v trajectory
    from stepsim.core.optim import adam_step

    rng = np.random.default_rng(3)
    d, steps, b2 = 16, 120, 0.9
    w, m, v = rng.normal(size=d), np.zeros(d), np.zeros(d)
    crits = {
        "I": AutoSwitch(beta2=b2, eps=1e-4), "II": AutoSwitch(beta2=b2, eps=1e-4, variant="II"),
        "hat": AutoSwitch(beta2=b2, eps=1e-4, stats_on="vhat"), "agarwal": Agarwal(threshold=0.05),
        "tang": Tang(beta2=b2, threshold=0.9),
    }
    states = {name: c.init(steps) for name, c in crits.items()}
    trajectory = []
    for k in range(1, steps + 1):
        g = np.ascontiguousarray(w * rng.uniform(0.5, 1.5, d) * 0.99**k)
        cache = {}
        for on in ("v", "vhat"):
            ww, mm, vv = w.copy(), m.copy(), v.copy()
            cache[on] = adam_step(ww, g, mm, vv, step=k, lr=1e-2, beta2=b2, log_stats=True,
                                  stats_on=on)
        w, m, v = ww, mm, vv
        trajectory.append(v.copy())
        for name, c in crits.items():
            states[name], _ = c.update(states[name], k, cache[c.stats_on])
    again = run_criteria_on_v(np.array(trajectory), crits, beta2=b2)
    fired = {name: s.fired_at for name, s in states.items()}
    assert fired == {name: s.fired_at for name, s in again.items()}
    assert sum(f is not None for f in fired.values()) >= 3  # the comparison is not vacuous


# -------------------------------------------------------------------------- registry


def test_registry_and_make_criterion():
    assert set(CRITERIA) == {"autoswitch", "agarwal", "tang", "fixed-step", "fixed-fraction"}
    assert make_criterion("autoswitch", variant="II") == AutoSwitch(variant="II")
    assert make_criterion("tang", threshold=0.9).threshold == 0.9
    assert make_criterion("agarwal").threshold == 0.5
    assert make_criterion("fixed-fraction", fraction=0.2) == FixedFraction(0.2)
    with pytest.raises(ValueError, match="autoswitch"):  # lists the choices
        make_criterion("nope")
    with pytest.raises(TypeError, match="foo"):
        make_criterion("autoswitch", foo=1)


@pytest.mark.parametrize("name, options, match", [
    ("autoswitch", {"eps": 0.0}, "eps"),
    ("autoswitch", {"eps": -1e-8}, "eps"),
    ("autoswitch", {"beta2": 1.0}, "beta2"),
    ("autoswitch", {"window_length": 0}, "window_length"),
    ("autoswitch", {"variant": "III"}, "variant"),
    ("autoswitch", {"window": "half"}, "window"),
    ("autoswitch", {"stats_on": "m"}, "stats_on"),
    ("autoswitch", {"zero_rule": "ignore"}, "zero_rule"),
    ("autoswitch", {"zero_rule": "floor", "zero_floor": 0.0}, "zero_floor"),
    ("agarwal", {"threshold": 0.0}, "threshold"),
    ("agarwal", {"norm": "linf"}, "norm"),
    ("tang", {"threshold": -1.0}, "threshold"),
    ("tang", {"window_length": 0}, "window_length"),
    ("tang", {"beta2": 0.0}, "beta2"),
    ("fixed-fraction", {"fraction": 1.5}, "fraction"),
    ("fixed-fraction", {"fraction": -0.1}, "fraction"),
    ("fixed-step", {"k0": 0}, "k0"),
])
def test_bad_options_name_the_value(name, options, match):
    with pytest.raises(ValueError, match=match):
        make_criterion(name, **options)


# --------------------------------------------------------------------------- Table 1


def test_table1_indexing_against_the_definition():
    rng = np.random.default_rng(4)
    v = np.cumsum(rng.normal(size=(30, 3)), axis=0)  # v_1..v_30
    vv = np.vstack([np.zeros(3), v])  # vv[k] = v_k, v_0 = 0
    trace = np.abs(np.diff(vv, axis=0)).sum(axis=1)  # trace[k-1] = ||v_k - v_{k-1}||_1
    for k0, h in [(1, 5), (7, 10), (20, 9)]:
        paper = sum(np.abs(vv[k + 1] - vv[k]).sum() for k in range(k0, k0 + h)) / h
        got = table1_score(trace, k0, horizon=h)
        assert got.score == pytest.approx(paper, rel=1e-12)
        assert (got.k0, got.horizon, got.steps_available, got.truncated) == (k0, h, h, False)
    assert table1_score([10, 20, 30, 40, 50], 2, horizon=2).score == 35.0


def test_table1_truncation_and_errors():
    trace = [10.0, 20.0, 30.0, 40.0, 50.0]  # steps 1..5
    s = table1_score(trace, 3, horizon=1000)
    assert (s.score, s.steps_available, s.truncated) == (45.0, 2, True)
    assert "k0=3" in repr(s) and "truncated to 2" in repr(s)
    assert "truncated" not in repr(table1_score(trace, 1, horizon=2))
    with pytest.raises(ValueError, match="k0=5"):
        table1_score(trace, 5)
    with pytest.raises(ValueError, match="k0"):
        table1_score(trace, 0)
    with pytest.raises(TypeError, match="k0"):
        table1_score(trace, None)  # a criterion that never fired has no score
    with pytest.raises(ValueError, match="1-D"):
        table1_score(np.ones((3, 2)), 1)
    with pytest.raises(ValueError, match="non-negative"):
        table1_score([1.0, -1.0, 2.0], 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.score = 0.0
    assert isinstance(s, Table1Score)


def test_table1_on_a_criterion_run():
    # a later switch scores lower on a decaying trajectory: why k0 is always reported
    a, r = 1e-3, 0.8
    v, start = geometric_v([a, a], r, 200)
    trace = np.abs(np.diff(np.vstack([start, v]), axis=0)).sum(axis=1)
    state = run_criteria_on_v(v, AutoSwitch(beta2=0.9), v0=start)
    early = table1_score(trace, state.fired_at - 5, horizon=50)
    at = table1_score(trace, state.fired_at, horizon=50)
    assert at.score < early.score
    # closed form: mean of 2 a r^(k+1) for k = k0..k0+49
    k = np.arange(state.fired_at, state.fired_at + 50)
    assert at.score == pytest.approx(np.mean(2 * a * r ** (k + 1)), rel=1e-8)


def test_runner_input_errors():
    with pytest.raises(ValueError, match="shape"):
        run_criteria_on_v(np.ones(5), AutoSwitch())
    with pytest.raises(TypeError, match="dtype"):
        run_criteria_on_v(np.ones((5, 2), dtype=np.int64), AutoSwitch())
    with pytest.raises(ValueError, match="finite"):
        run_criteria_on_v(np.full((5, 2), np.nan), AutoSwitch())
    with pytest.raises(ValueError, match="v0"):
        run_criteria_on_v(np.ones((5, 2)), AutoSwitch(), v0=np.zeros(3))
    with pytest.raises(TypeError, match="criteria"):
        run_criteria_on_v(np.ones((5, 2)), [AutoSwitch()])


# --- fraction -> step, and criteria tied to the Adam they watch ---------------------------

def test_fraction_to_step_is_robust_to_floating_point():
    from stepsim.recipes.criteria import FixedFraction, fraction_to_step

    assert 0.55 * 100 > 55  # the trap: 55.00000000000001
    assert fraction_to_step(0.55, 100) == 55
    assert FixedFraction(0.55).step_for(100) == 55
    assert fraction_to_step(0.29, 100) == 29
    assert fraction_to_step(0.555, 100) == 56  # a real fraction of a step still rounds up
    assert fraction_to_step(0.0, 100) == 1
    for total in range(1, 400):
        for tenth in range(1, 21):
            fraction = tenth * 0.05
            assert fraction_to_step(fraction, total) == max(1, -(-tenth * total // 20))


def test_make_criterion_takes_beta2_and_eps_from_adam():
    from types import SimpleNamespace

    from stepsim.recipes.criteria import check_matches_adam, make_criterion

    adam = SimpleNamespace(beta2=0.99, eps=1e-6)
    auto = make_criterion("autoswitch", adam=adam)
    assert (auto.beta2, auto.eps) == (0.99, 1e-6)
    assert make_criterion("tang", adam=adam).beta2 == 0.99
    assert make_criterion("autoswitch", adam=adam, eps=1e-7).eps == 1e-7  # explicit wins
    make_criterion("agarwal", adam=adam)  # no tied options: nothing to take
    with pytest.raises(ValueError,
                       match=r"criterion's eps=1e-08 differs from the optimizer's eps=1e-06"):
        check_matches_adam(make_criterion("autoswitch", beta2=0.99), adam)


@pytest.mark.parametrize("crit", [AutoSwitch(beta2=0.9), Tang(beta2=0.9), Agarwal(),
                                  make_criterion("fixed-step", k0=3)])
def test_update_is_pure_the_old_state_replays(crit):
    stats = [AdamStats(dv_l1=4.0 / k, dv_log_sum=0.0, dv_zeros=0, v_l1=1.0 + k,
                       v_l2sq=1.0 + k, size=4) for k in range(1, 30)]
    state = crit.init(100)
    for k, s in enumerate(stats[:10], start=1):
        state, _ = crit.update(state, k, s)
    snapshot = pickle.dumps(state)
    a, _ = crit.update(state, 11, stats[10])
    b, _ = crit.update(state, 11, stats[10])  # the same old state, again
    assert pickle.dumps(state) == snapshot
    assert pickle.dumps(a) == pickle.dumps(b)
