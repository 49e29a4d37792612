"""The fused Adam-with-statistics block (issue 26): one pass that updates w, m, v and sums
the statistics of dv must give the bits of the two passes it replaces (the update, then
``_block_stats`` on the new and old v), entries and sums alike, and the same counts of
non-finite g and of old v that are not >= 0."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

DTYPES = [np.float32, np.float64]


def _inputs(dtype, n, seed, bad):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(n).astype(dtype)
    g = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 3, n)).astype(dtype)
    m = (rng.standard_normal(n) * 1e-2).astype(dtype)
    v = (rng.random(n) * 1e-3).astype(dtype)
    g[::7] = 0  # dv == 0 where v was 0 too (with b2 * 0 + c2 * 0)
    v[::7] = 0
    if bad and n:
        g[rng.integers(0, n)] = np.nan
        g[rng.integers(0, n)] = np.inf
        v[rng.integers(0, n)] = -1.0
        v[rng.integers(0, n)] = np.nan
    return w, g, m, v


def _scalars(dtype, step, decay):
    b1, b2, eps, lr = 0.9, 0.999, 1e-8, 1e-3
    vals = (b1, 1 - b1, b2, 1 - b2, 1 / (1 - b1 ** step), 1 / (1 - b2 ** step), eps, 0.0,
            lr, decay)
    return tuple(dtype(x) for x in vals)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DTYPES), st.integers(0, 300), st.integers(0, 2**32 - 1),
       st.booleans(), st.booleans(), st.sampled_from([1.0, 0.999]))
def test_fused_block_gives_the_bits_of_update_then_stats(dtype, n, seed, raw, bad, decay):
    from stepsim.core import _optim_kernels as K

    scal = _scalars(dtype, 7, decay)
    scales = (1.0, 1.0) if raw else (1.25, 1.7)
    w, g, m, v = _inputs(dtype, n, seed, bad)
    w2, m2, v2 = w.copy(), m.copy(), v.copy()
    v_old = np.empty_like(v)
    want_bad = K._adam_block(w, g, m, v, v_old, True, *scal)
    want = np.empty(5)
    K._block_stats(v, v_old, *scales, False, want)
    got = np.empty(5)
    acc, counts = np.full((3, K.LANES), np.nan), np.full(2, -7, np.int64)  # scratch: any values
    got_bad = K._adam_block_stats(w2, g, m2, v2, *scal, *scales, acc, counts, got)
    assert tuple(int(x) for x in got_bad) == tuple(int(x) for x in want_bad)
    for a, b in ((w, w2), (m, m2), (v, v2)):
        assert a.tobytes() == b.tobytes()
    assert got.tobytes() == want.tobytes()


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(DTYPES), st.integers(1, 3 * 4096 + 77), st.integers(0, 2**32 - 1))
def test_adam_step_statistics_match_the_reference(dtype, n, seed):
    # the public step (several blocks, the fused path) against the NumPy reference's
    # update and a float64 recount of the statistics (exact checks on the bits that
    # do not depend on summation order: the update and the zero count)
    import stepsim
    from stepsim.core import reference

    w, g, m, v = _inputs(dtype, n, seed, False)
    wr, mr, vr = w.copy(), m.copy(), v.copy()
    v_old = v.astype(np.float64)
    stats = stepsim.adam_step(w, g, m, v, step=5, lr=1e-3)
    reference.adam_step(wr, g, mr, vr, step=5, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8)
    for a, b in ((w, wr), (m, mr), (v, vr)):
        assert a.tobytes() == b.tobytes()
    dv = np.abs(v.astype(np.float64) - v_old)
    assert stats.dv_zeros == int(np.count_nonzero(dv == 0))
    np.testing.assert_allclose(stats.dv_l1, dv.sum(), rtol=1e-12)
    np.testing.assert_allclose(stats.v_l1, v.astype(np.float64).sum(), rtol=1e-12)
