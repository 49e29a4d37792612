"""N:M masks: the numba kernels against the NumPy reference, and the mask's invariants."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepsim import apply_nm, apply_nm_conv, nm_mask, nm_mask_conv
from stepsim.core import reference as ref
from tests.strategies import nm_case


def _groups(w, mask, m, axis):
    """(G, m) views of |w| and the mask, one group per row."""
    mag = np.abs(np.moveaxis(w.astype(np.float64), axis, -1)).reshape(-1, m)
    return mag, np.moveaxis(mask, axis, -1).reshape(-1, m)


@given(nm_case())
def test_kernel_matches_reference(case):
    w, n, m, axis = case
    np.testing.assert_array_equal(nm_mask(w, n, m, axis), ref.nm_mask(w, n, m, axis))


@given(nm_case())
def test_every_group_keeps_exactly_n_of_the_largest(case):
    w, n, m, axis = case
    mask = nm_mask(w, n, m, axis)
    assert mask.dtype == bool and mask.shape == w.shape and mask.flags.c_contiguous
    mag, keep = _groups(w, mask, m, axis)
    assert (keep.sum(axis=1) == n).all()
    if n < m:
        kept_min = np.where(keep, mag, np.inf).min(axis=1)
        dropped_max = np.where(keep, -np.inf, mag).max(axis=1)
        assert (kept_min >= dropped_max).all()
        # ties: a dropped entry equal to a kept one must sit at a higher index
        for row_mag, row_keep in zip(mag, keep):
            for j in np.flatnonzero(~row_keep):
                equal_kept = np.flatnonzero(row_keep & (row_mag == row_mag[j]))
                assert (equal_kept < j).all()


@pytest.mark.parametrize(
    "n,m", [(1, 4), (2, 4), (3, 4), (1, 8), (3, 8), (5, 16), (1, 32), (31, 32)]
)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_ties_keep_the_lower_index(n, m, dtype):
    w = np.full((3, 2 * m), -1.5, dtype=dtype)
    w[1:] = 0.0
    w[2, ::2] = -0.0  # -0 and +0 are the same magnitude
    expected = np.tile(np.arange(m) < n, (3, 2))
    np.testing.assert_array_equal(nm_mask(w, n, m), expected)


@given(nm_case())
def test_n_equal_m_keeps_everything(case):
    w, _, m, axis = case
    assert nm_mask(w, m, m, axis).all()


def test_known_2_4_mask_and_apply():
    w = np.array([[0.1, -3.0, 2.0, 0.5, 4.0, 4.0, -4.0, 1.0]], dtype=np.float32)
    expected = np.array([[False, True, True, False, True, True, False, False]])
    np.testing.assert_array_equal(nm_mask(w, 2, 4), expected)
    np.testing.assert_array_equal(apply_nm(w, 2, 4), np.where(expected, w, 0).astype(np.float32))
    assert apply_nm(w, 2, 4).dtype == np.float32


def test_infinities_are_magnitudes_not_errors():
    w = np.array([1.0, -np.inf, 3.0, np.inf], dtype=np.float32)
    np.testing.assert_array_equal(nm_mask(w, 2, 4), [False, True, False, True])


def test_large_array_crosses_parallel_blocks():
    rng = np.random.default_rng(7)
    for dtype in (np.float16, np.float32, np.float64):
        w = rng.standard_normal((5, 4 * 2048 + 16)).astype(dtype)
        for n, m in ((2, 4), (1, 4), (1, 8), (3, 4)):
            np.testing.assert_array_equal(nm_mask(w, n, m), ref.nm_mask(w, n, m))


@given(st.integers(0, 2**32 - 1), st.sampled_from([(2, 4), (1, 4), (2, 8), (1, 16)]))
def test_conv_groups_input_channels_like_sr_ste(seed, nm):
    n, m = nm
    w = np.random.default_rng(seed).standard_normal((3, 2 * m, 3, 2)).astype(np.float32)
    # SR-STE views a conv weight as [out, kh, kw, in] and groups the last axis
    as_srste = w.transpose(0, 2, 3, 1)
    expected = ref.nm_mask(as_srste, n, m, axis=-1).transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(nm_mask_conv(w, n, m), expected)
    np.testing.assert_array_equal(apply_nm_conv(w, n, m), np.where(expected, w, 0))


def test_axis_argument_matches_transposed_input():
    w = np.random.default_rng(1).standard_normal((8, 12)).astype(np.float32)
    np.testing.assert_array_equal(nm_mask(w, 1, 4, axis=0), nm_mask(w.T.copy(), 1, 4).T)


def test_non_contiguous_input_is_accepted():
    w = np.random.default_rng(2).standard_normal((16, 16)).astype(np.float64)[::2, :]
    assert not w.flags.c_contiguous
    np.testing.assert_array_equal(nm_mask(w, 2, 4), ref.nm_mask(w, 2, 4))


@pytest.mark.parametrize(
    "kwargs, error, text",
    [
        ({"n": 3, "m": 2}, ValueError, "n must be <= m"),
        ({"n": 0, "m": 4}, ValueError, "n must be >= 1, got 0"),
        ({"n": 2, "m": 3}, ValueError, "not divisible by m = 3"),
        ({"n": 2.0, "m": 4}, TypeError, "n must be an integer"),
        ({"n": True, "m": 4}, TypeError, "n must be an integer"),
        ({"n": 2, "m": 4, "axis": 2}, ValueError, "axis=2 is out of range"),
    ],
)
def test_bad_arguments_name_the_value(kwargs, error, text):
    w = np.ones((2, 8), dtype=np.float32)
    with pytest.raises(error, match=text):
        nm_mask(w, **kwargs)


def test_bad_weights():
    with pytest.raises(ValueError, match=r"NaN value\(s\) \(first at index \(1, 6\)\)"):
        w = np.ones((2, 8), dtype=np.float32)
        w[1, 6] = np.nan
        nm_mask(w, 2, 4)
    with pytest.raises(ValueError, match="NaN"):
        nm_mask(np.array([1.0, np.nan, 0.0, 2.0, 1.0, 1.0, 1.0, 1.0]), 1, 8)
    with pytest.raises(TypeError, match="dtype"):
        nm_mask(np.ones((2, 8), dtype=np.int32), 2, 4)
    with pytest.raises(TypeError, match="numpy.ndarray"):
        nm_mask([[1.0, 2.0, 3.0, 4.0]], 2, 4)
    with pytest.raises(ValueError, match="at least one dimension"):
        nm_mask(np.array(1.0, dtype=np.float32), 1, 1)
    with pytest.raises(ValueError, match="must be 4-D"):
        nm_mask_conv(np.ones((4, 8), dtype=np.float32), 2, 4)


# --- the kernels for M = 8, 16, 32 (unrolled N:8; transposed blocks, rank or selection) ---

@pytest.mark.parametrize("m", [8, 16, 32, 12])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_every_n_of_wide_groups_matches_the_reference(m, dtype):
    # every N (both kernels of the transposed path: rounds of selection for N or M - N
    # small, ranks otherwise), ties from a coarse grid, a block edge crossed
    rng = np.random.default_rng(m)
    groups = 4096 // m * 2 + 3
    w = rng.integers(-6, 7, size=(groups, m)).astype(dtype)
    w[::3] = rng.standard_normal((len(w[::3]), m))
    w[5] = -0.0
    w[6, ::2] = 0.0
    for n in range(1, m + 1):
        np.testing.assert_array_equal(nm_mask(w, n, m), ref.nm_mask(w, n, m), err_msg=f"{n}:{m}")


@pytest.mark.parametrize("m", [8, 16, 32])
def test_nan_is_found_by_the_wide_kernels(m):
    w = np.ones((3, 2 * m), np.float32)
    w[2, m + 1] = np.nan
    for n in (1, m // 2, m - 1):
        with pytest.raises(ValueError, match=r"1 NaN value\(s\) \(first at index \(2, "):
            nm_mask(w, n, m)


@pytest.mark.parametrize("n,m", [(1, 16), (3, 5), (2, 32), (5, 16)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_the_mask_is_the_same_on_one_thread_and_on_two(n, m, dtype):
    # M != 4, 8: several threads take disjoint runs of blocks (4096 entries a block); the
    # mask, its NaN report and the reference agree for any thread count
    import numba

    rng = np.random.default_rng(m)
    w = rng.standard_normal((9, 256 * m)).astype(dtype)
    w[:, ::3] = dtype(0.5)  # ties
    before = numba.get_num_threads()
    try:
        masks = []
        for threads in (1, 2):
            numba.set_num_threads(threads)
            masks.append(nm_mask(w, n, m))
            bad = w.copy()
            bad[-1, -1] = np.nan  # in the last block: the second thread's
            with pytest.raises(ValueError, match="NaN"):
                nm_mask(bad, n, m)
    finally:
        numba.set_num_threads(before)
    assert w.size > 2 * 4096
    np.testing.assert_array_equal(masks[0], masks[1])
    np.testing.assert_array_equal(masks[0], ref.nm_mask(w, n, m, -1))
