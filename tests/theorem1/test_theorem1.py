"""Theorem 1 checker: engine vs NumPy references, determinism, intervals, verdicts, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepsim.theorem1 import (
    HOLDS,
    INCONCLUSIVE,
    PROCESSES,
    VIOLATED,
    _rng,
    check_theorem1,
    clopper_pearson,
    hoeffding_bound,
    k0_proof,
    k0_statement,
    lag_grid,
    make_process,
    simulate,
    theorem1_bound,
    vhat_reference,
    worst_case,
)
from stepsim.theorem1.check import overall, verdicts

SMALL = {"beta2": 0.9, "k0": 12, "trials": 4, "dim": 3, "seed": 5}
SMALL_LAGS = np.array([1, 2, 5, 13, 40])


def _expected_stats(g2, beta2, k0, lags):
    """|vhat_{k0+lag} - vhat_k0| from the direct NumPy recurrence, (trials, dim, n_lags)."""
    vhat = vhat_reference(g2, beta2)  # vhat[j] is step j + 1
    return np.abs(vhat[k0 - 1 + lags] - vhat[k0 - 1]).transpose(1, 2, 0)


def _process(name):
    return make_process(name, rho=0.9) if name == "ar1" else make_process(name)


class BetaProcess:
    """A user process following the protocol: i.i.d. Beta(0.5, 2) from a Generator."""

    name, G, stationary, independent_coordinates = "beta", 1.0, True, True

    def start(self, seed, shape):
        return {"rng": np.random.default_rng(seed), "shape": shape}

    def sample(self, state, k_first, n_steps):
        return state["rng"].beta(0.5, 2.0, size=(n_steps, *state["shape"]))


# --- the engine against the direct recurrence ----------------------------------------


@given(
    name=st.sampled_from(sorted(PROCESSES)),
    beta2=st.sampled_from([0.5, 0.9, 0.97, 0.999]),
    k0=st.integers(1, 30),
    lags=st.lists(st.integers(1, 60), min_size=1, max_size=6, unique=True).map(sorted),
    trials=st.integers(1, 4),
    dim=st.integers(1, 11),
    seed=st.integers(0, 2**64 - 1),
)
def test_engine_equals_direct_numpy_recurrence_exactly(name, beta2, k0, lags, trials, dim, seed):
    process = _process(name)
    lags = np.array(lags)
    sim = simulate(process, beta2=beta2, k0=k0, lags=lags, trials=trials, dim=dim, seed=seed)
    g2 = process.sample(process.start(seed, (trials, dim)), 1, k0 + int(lags[-1]))
    np.testing.assert_array_equal(sim.stats, _expected_stats(g2, beta2, k0, lags))
    assert sim.max_g2 == g2.max() <= process.G
    ref = simulate(process, beta2=beta2, k0=k0, lags=lags, trials=trials, dim=dim, seed=seed,
                   engine="numpy")
    np.testing.assert_array_equal(sim.stats, ref.stats)


@pytest.mark.parametrize("name", sorted(PROCESSES))
def test_engine_equals_reference_over_several_work_items(name):
    # 3 x 200 = 600 pairs: three work items of _kernels.LANES = 256 lanes, the last
    # partial; lags at odd and even offsets and across BLOCK boundaries
    from stepsim.theorem1 import _kernels

    assert 2 * _kernels.LANES < 3 * 200 < 3 * _kernels.LANES
    kw = {"beta2": 0.95, "k0": 31, "lags": np.array([1, 2, 3, 16, 17, 33, 70]), "trials": 3,
          "dim": 200, "seed": 11}
    sim = simulate(_process(name), **kw)
    ref = simulate(_process(name), engine="numpy", **kw)
    np.testing.assert_array_equal(sim.stats, ref.stats)
    assert sim.max_g2 == ref.max_g2


def test_generic_path_equals_direct_recurrence_for_a_user_process():
    proc = BetaProcess()
    sim = simulate(proc, lags=SMALL_LAGS, **SMALL)
    g2 = proc.sample(proc.start(SMALL["seed"], (4, 3)), 1, 12 + 40)
    np.testing.assert_array_equal(sim.stats, _expected_stats(g2, 0.9, 12, SMALL_LAGS))
    ref = simulate(proc, lags=SMALL_LAGS, engine="numpy", **SMALL)
    np.testing.assert_array_equal(sim.stats, ref.stats)


@given(chunk=st.integers(1, 70), seed=st.integers(0, 2**32), dim=st.integers(1, 5))
def test_generic_numba_recurrence_equals_numpy_for_any_chunking(chunk, seed, dim):
    kw = {"beta2": 0.8, "k0": 9, "lags": np.array([1, 4, 30, 61]), "trials": 3, "dim": dim}
    a = simulate(BetaProcess(), seed=seed, chunk_steps=chunk, **kw)
    b = simulate(BetaProcess(), seed=seed, chunk_steps=13, engine="numpy", **kw)
    np.testing.assert_array_equal(a.stats, b.stats)


def test_vhat_reference_is_the_spec_recurrence():
    rng = np.random.default_rng(0)
    g2 = rng.random((50, 3))
    beta2 = 0.95
    v = np.zeros(3)
    for k in range(1, 51):
        v = beta2 * v + (1 - beta2) * g2[k - 1]
        np.testing.assert_allclose(vhat_reference(g2, beta2)[k - 1], v / (1 - beta2**k),
                                   rtol=1e-14)


def test_constant_gradient_gives_zero_statistic():
    sim = simulate("rademacher", lags=SMALL_LAGS, **SMALL)
    assert np.all(sim.stats <= 1e-15)


# --- randomness: same seed, same bits --------------------------------------------------


def test_same_seed_same_bits_across_chunks_and_threads():
    import numba

    kw = {"beta2": 0.99, "k0": 123, "lags": lag_grid(300, 4), "trials": 9, "dim": 60}
    base = simulate("ar1", seed=3, **kw).stats
    np.testing.assert_array_equal(base, simulate("ar1", seed=3, chunk_trials=2, **kw).stats)
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = simulate("ar1", seed=3, **kw).stats
    finally:
        numba.set_num_threads(old)
    np.testing.assert_array_equal(base, one)
    assert not np.array_equal(base, simulate("ar1", seed=4, **kw).stats)
    # the generic path: any chunk size along time gives the same bits
    g1 = simulate(BetaProcess(), seed=3, chunk_steps=7, **kw).stats
    g2 = simulate(BetaProcess(), seed=3, chunk_steps=1000, **kw).stats
    np.testing.assert_array_equal(g1, g2)


def test_builtin_sample_continues_across_chunks():
    proc = make_process("regime", q=0.2)
    whole = proc.sample(proc.start(1, (3, 2)), 1, 30)
    state = proc.start(1, (3, 2))
    parts = np.concatenate([proc.sample(state, 1, 11), proc.sample(state, 12, 19)])
    np.testing.assert_array_equal(whole, parts)


@given(key=st.integers(0, 2**64 - 1), step=st.integers(0, _rng.MAX_STEP - 1),
       stream=st.integers(0, 3))
def test_numba_counter_rng_equals_numpy(key, step, stream):
    from stepsim.theorem1 import _kernels

    k = np.uint64(key)
    words = _rng.key_words(np.array([k]))
    assert _kernels.key_words(k) == tuple(w[0] for w in words)
    assert _kernels.draw(k, step, stream) == _rng.bits(np.array([k]), step, stream)[0]
    assert _kernels.uniform(k, step, stream) == _rng.uniform(np.array([k]), step, stream)[0]
    assert _kernels.stream_key(k, np.uint64(step), np.uint64(stream)) == _rng.stream_keys(
        key, np.array([step]), np.array([stream]))[0]
    assert _kernels.normal(k, step, stream) == _rng.normal(np.array([k]), step, stream)[0]


def test_uniform_is_the_32_bit_draw_scaled():
    keys = _rng.stream_keys(3, np.arange(4)[:, None], np.arange(5)[None, :])
    x = _rng.bits(keys, 17, 1)
    assert x.dtype == np.uint32
    np.testing.assert_array_equal(_rng.uniform(keys, 17, 1),
                                  (x ^ np.uint32(2**31)).astype(np.float64) / 2**32)
    u = _rng.uniform_open(keys, 17, 1)
    assert np.all((u > 0) & (u < 1))


def test_steps_past_the_counter_range_are_rejected():
    keys = _rng.stream_keys(0, np.arange(2), 0)
    with pytest.raises(ValueError, match="step"):
        _rng.uniform(keys, _rng.MAX_STEP, 0)
    with pytest.raises(ValueError, match="2\\^30"):
        simulate("uniform", beta2=0.9, k0=_rng.MAX_STEP - 5, lags=[5], trials=1, dim=1,
                 seed=0)


@given(p=st.floats(1e-300, 1.0, exclude_max=True))
def test_ndtri_matches_scipy(p):
    from scipy.special import ndtri

    from stepsim.theorem1 import _kernels

    ours = _rng.ndtri(np.array([p]))[0]
    assert ours == _kernels.ndtri(p)
    assert math.isclose(ours, ndtri(p), rel_tol=1e-14, abs_tol=1e-15)


def test_uniforms_look_uniform():
    keys = _rng.stream_keys(0, np.arange(200)[:, None], np.arange(50)[None, :])
    u = _rng.uniform(keys, 7, 0).ravel()
    assert 0.0 <= u.min() and u.max() < 1.0
    hist = np.histogram(u, bins=10, range=(0, 1))[0]
    from scipy.stats import chisquare

    assert chisquare(hist).pvalue > 1e-4
    z = _rng.normal(keys, 3, 0).ravel()
    assert abs(z.mean()) < 0.05 and abs(z.std() - 1) < 0.05


# --- the generator's quality ------------------------------------------------------------
# Fixed seeds, so each assertion is deterministic; thresholds are 5 standard errors (or
# p > 1e-4) so that a sound generator passes by a wide margin and a flawed one (a biased
# bit, correlated neighbours, streams that are shifted copies) fails.

N_STEPS = 2**16


def _stream(seed=0, trial=0, coord=0, stream=0, steps=N_STEPS):
    key = _rng.stream_keys(seed, np.array([trial]), np.array([coord]))
    return _rng.uniform(key, np.arange(1, steps + 1), stream)


def test_generator_one_stream_mean_variance_and_bins():
    from scipy.stats import chisquare

    u = _stream()
    n = len(u)
    assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / n)
    assert abs(u.var() - 1 / 12) < 5 * math.sqrt((1 / 80 - 1 / 144) / n)
    assert chisquare(np.histogram(u, bins=256, range=(0, 1))[0]).pvalue > 1e-4
    # every one of the 32 bits is a fair coin
    x = _rng.bits(_rng.stream_keys(0, np.array([0]), np.array([0])),
                  np.arange(1, n + 1), 0)
    ones = ((x[:, None] >> np.arange(32, dtype=np.uint32)) & 1).mean(axis=0)
    assert np.all(np.abs(ones - 0.5) < 5 * 0.5 / math.sqrt(n))


def test_generator_no_serial_correlation_within_a_stream():
    from scipy.stats import chisquare

    u = _stream(seed=1)
    for lag in (1, 2, 3, 10, 100):
        r = np.corrcoef(u[:-lag], u[lag:])[0, 1]
        assert abs(r) < 5 / math.sqrt(len(u) - lag), (lag, r)
    # consecutive pairs fill the unit square evenly (16 x 16 cells)
    pairs = np.histogram2d(u[:-1:2], u[1::2], bins=16, range=[[0, 1], [0, 1]])[0]
    assert chisquare(pairs.ravel()).pvalue > 1e-4
    # two streams of one key (spikes draws streams 0 and 1 at every step)
    r = np.corrcoef(u, _stream(seed=1, stream=1))[0, 1]
    assert abs(r) < 5 / math.sqrt(len(u))


def test_generator_neighbouring_streams_are_uncorrelated():
    steps = np.arange(1, 2001)
    keys = _rng.stream_keys(2, np.arange(8)[:, None], np.arange(64)[None, :])
    u = _rng.uniform(keys[..., None], steps, 0)  # (trials, coords, steps)
    u = (u - u.mean(axis=-1, keepdims=True)) / u.std(axis=-1, keepdims=True)
    n = len(steps)
    for a, b in ((u[:, :-1], u[:, 1:]), (u[:-1], u[1:])):  # coordinate c, c+1; trial t, t+1
        r = (a * b).mean(axis=-1).ravel()
        assert np.all(np.abs(r) < 5.5 / math.sqrt(n))  # each pair
        assert abs(r.mean()) < 5 / math.sqrt(n * r.size)  # on average


def test_generator_streams_are_not_shifted_copies():
    # two streams that were one sequence read at different offsets (or in another
    # order) would share most of their 32-bit values; independent streams of 2^13 draws
    # share a value with probability 2^26 / 2^32 = 1/64 per pair
    steps = np.arange(1, 2**13 + 1)
    keys = _rng.stream_keys(3, np.arange(4)[:, None], np.arange(32)[None, :]).ravel()
    x = _rng.bits(keys[:, None], steps, 0)  # (128 streams, steps)
    shared = sum(len(np.intersect1d(x[i], x[i + 1])) for i in range(len(keys) - 1))
    assert shared <= 12  # expected 2, Poisson tail P(> 12) ~ 1e-6
    # a key's streams 0..3 and the regime chain's shared key do not repeat each other
    key = keys[:1]
    seqs = [_rng.bits(key, steps, s) for s in range(4)]
    seqs.append(_rng.bits(_rng.stream_keys(3, np.array([0]), _rng.SHARED_COORD), steps, 2))
    pooled = np.concatenate(seqs)
    assert len(np.unique(pooled)) >= len(pooled) - 5


# --- bounds, intervals, verdicts -------------------------------------------------------


def test_k0_constants():
    for beta2 in (0.9, 0.99, 0.999, 0.9999):
        k = k0_statement(beta2)
        assert beta2**k < 1 - 1 / math.sqrt(2) <= beta2 ** (k - 1)
        k = k0_proof(beta2)
        assert beta2**k < 0.5 <= beta2 ** (k - 1)
    assert k0_statement(0.999) == 1228 and k0_proof(0.999) == 693


def test_lag_grid():
    lags = lag_grid(10_000)
    assert lags[0] == 1 and lags[-1] == 10_000 and {1, 10, 100, 1000}.issubset(lags.tolist())
    assert np.all(np.diff(lags) > 0)


@pytest.mark.parametrize("level", [0.9, 0.95, 0.999])
def test_clopper_pearson_matches_scipy(level):
    from scipy.stats import binomtest

    n = 137
    ks = np.array([0, 1, 5, 68, 136, 137])
    lo, hi = clopper_pearson(ks, n, level)
    for k, a, b in zip(ks, lo, hi):
        ci = binomtest(int(k), n).proportion_ci(confidence_level=level, method="exact")
        assert math.isclose(a, ci.low, abs_tol=1e-12) and math.isclose(b, ci.high, abs_tol=1e-12)


def test_verdict_definitions():
    assert verdicts([0.0, 0.06, 0.01], [0.05, 0.2, 0.07], 0.05) == (HOLDS, VIOLATED, INCONCLUSIVE)
    assert overall([0, 0, 0], 10_000, 0.05, 0.95) == HOLDS
    assert overall([0, 9000, 0], 10_000, 0.05, 0.95) == VIOLATED
    assert overall([0, 1, 0], 40, 0.05, 0.95) == INCONCLUSIVE


def test_worst_case_is_attained_by_a_step_sequence():
    beta2, k0, G = 0.9, 15, 2.0
    lags = np.array([1, 3, 10, 40])
    g2 = np.where(np.arange(1, k0 + 41) <= k0, G, 0.0)[:, None]
    stats = _expected_stats(g2[:, :, None], beta2, k0, lags)[0, 0]
    np.testing.assert_allclose(stats, worst_case(G, beta2, k0, lags), rtol=1e-12)


def test_analytic_columns_use_scalar_pow_in_a_fixed_order():
    """The same bits on every CPU: NumPy's SIMD power (AVX-512) differs from scalar pow in
    the last bit, so worst_case / hoeffding_bound must equal element-by-element math.pow."""
    beta2, k0, G, delta = 0.999, 1, 1.0, 0.05
    lags = lag_grid(10_000, 8)
    expected = [G * (1 - math.pow(beta2, n)) / (1 - math.pow(beta2, k0 + n)) for n in lags]
    assert worst_case(G, beta2, k0, lags).tolist() == expected
    b = beta2
    h = []
    for n in lags:
        k = k0 + n
        d = (1 - math.pow(b, n)) / ((1 - math.pow(b, k0)) * (1 - math.pow(b, k)))
        one_m_bk = 1 - math.pow(b, k)
        s = (1 - b) ** 2 / (1 - b * b) * ((1 - math.pow(b, 2 * n)) / (one_m_bk * one_m_bk)
                                          + (1 - math.pow(b, 2 * k0)) * d * d)
        h.append(G * math.sqrt(s * math.log(2 / delta) / 2))
    assert hoeffding_bound(G, beta2, k0, lags, delta).tolist() == h


@given(beta2=st.floats(0.5, 0.9999), extra=st.integers(0, 5000), lag=st.integers(1, 10**6))
def test_hoeffding_bound_is_below_the_paper_bound_past_the_condition(beta2, extra, lag):
    k0 = k0_statement(beta2) + extra
    h = hoeffding_bound(1.0, beta2, k0, [lag], 0.05)[0]
    b = theorem1_bound(1.0, beta2, [lag], 0.05)[0]
    assert h <= b * math.sqrt(6 / 8) * (1 + 1e-9)


# --- checks end to end (small scale) ---------------------------------------------------


def test_nonstationary_control_is_flagged_violated():
    r = check_theorem1("drift", trials=30, dim=4, seed=1, per_decade=2)
    assert r.coord_overall == VIOLATED and r.inf_overall == VIOLATED
    assert r.at(10_000).coord.verdict == VIOLATED
    assert any("NOT stationary" in note for note in r.notes)


@pytest.mark.parametrize("name", ["uniform", "twopoint", "spikes"])
def test_iid_bounded_process_is_not_violated(name):
    r = check_theorem1(name, trials=30, dim=4, seed=2, per_decade=2)
    assert all(VIOLATED not in (row.coord.verdict, row.inf.verdict) for row in r.rows)
    assert r.coord_n == 120 and r.inf_n == 30
    assert all(row.coord.tightness < 1 for row in r.rows)


def test_small_k0_breaks_the_bound_even_for_iid():
    r = check_theorem1("uniform", beta2=0.99, k0=1, trials=40, dim=2, horizon=100, seed=0)
    assert r.coord_overall == VIOLATED and not r.k0_meets_condition


def test_coupled_coordinates_use_one_coordinate_per_trial():
    r = check_theorem1("regime", process_params={"shared": 1}, beta2=0.99, trials=20, dim=5,
                       horizon=50, seed=0)
    assert not r.independent_coordinates and r.coord_n == 20
    with pytest.raises(ValueError, match="shared"):
        make_process("regime", shared=0.5)


def test_result_fields_and_summary():
    r = check_theorem1("uniform", beta2=0.99, trials=10, dim=3, horizon=100, seed=0,
                       per_decade=2)
    n = len(r.lags)
    assert all(r.column(f).shape == (n,) for f in ("bound", "coord.rate", "inf.quantile",
                                                     "coord.verdict", "inf.ci_high"))
    row = r.at(r.lags[2])
    assert row.lag == r.lags[2] and row.inf.n == 10 and row.coord.n == 30
    assert row.coord.rate == row.coord.violations / row.coord.n
    assert row.inf.tightness == row.inf.quantile / row.bound
    np.testing.assert_array_equal(r.column("inf.violations"),
                                  [x.inf.violations for x in r.rows])
    with pytest.raises(ValueError, match="unknown column 'coord'"):
        r.column("coord")
    with pytest.raises(ValueError, match="unknown column 'bound.rate'"):
        r.column("bound.rate")
    document = r.to_dict()
    assert set(document["rows"][0]) == {"lag", "bound", "worst_case", "hoeffding_bound",
                                        "coord", "inf"}
    assert r.k0 == k0_statement(0.99) and r.coordinate_steps == 10 * 3 * (r.k0 + 100)
    assert "overall" in r.summary() and "uniform" in repr(r)
    with pytest.raises(ValueError, match="not simulated"):
        r.at(7)


# --- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, match", [
    ({"delta": 0.0}, "delta"), ({"delta": 1.0}, "delta"), ({"delta": -0.5}, "delta"),
    ({"beta2": 0.0}, "beta2"), ({"beta2": 1.0}, "beta2"), ({"G": 0.0}, "G"),
    ({"G": -1.0}, "G"), ({"k0": 0}, "k0"), ({"trials": 0}, "trials"), ({"dim": 0}, "dim"),
    ({"process": "nope"}, "unknown process"), ({"ci_level": 1.0}, "ci_level"),
    ({"process_params": {"rho": 0.5}}, "unknown parameter"), ({"lags": [3, 2]}, "lags"),
    ({"lags": [0, 2]}, "lags"), ({"seed": -1}, "seed"),
])
def test_bad_parameters_raise_clear_errors(kwargs, match):
    kw = {"trials": 2, "dim": 2, "horizon": 10, "beta2": 0.9, **kwargs}
    with pytest.raises(ValueError, match=match):
        check_theorem1(**kw)


class _Bad(BetaProcess):
    def __init__(self, kind):
        self.kind = kind

    def sample(self, state, k_first, n_steps):
        g2 = super().sample(state, k_first, n_steps)
        if self.kind == "shape":
            return g2[:, :, :1]
        if self.kind == "nan":
            g2[-1, 0, 0] = np.nan
        if self.kind == "negative":
            g2[0, 0, 0] = -0.1
        if self.kind == "big":
            g2[0, 0, 0] = 1.5
        if self.kind == "list":
            return g2.tolist()
        return g2


@pytest.mark.parametrize("kind, error, match", [
    ("shape", ValueError, "shape"), ("nan", ValueError, "NaN"),
    ("negative", ValueError, "negative"), ("big", ValueError, "> G"),
    ("list", TypeError, "NumPy array"),
])
def test_bad_user_process_is_reported(kind, error, match):
    with pytest.raises(error, match=match):
        simulate(_Bad(kind), lags=SMALL_LAGS, **SMALL)


def test_process_protocol_is_checked():
    with pytest.raises(TypeError, match="start"):
        check_theorem1(object(), trials=2, dim=2, horizon=10)
    with pytest.raises(ValueError, match="differs"):
        check_theorem1(BetaProcess(), G=2.0, trials=2, dim=2, horizon=10)
