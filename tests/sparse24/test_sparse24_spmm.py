"""Reference mma.sp matmul: against dense matmuls, numba against NumPy, lanes and tiles."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepsim.sparse24.layout import compress_2to4, decompress_2to4, layout_spec, meta_rowmajor
from stepsim.sparse24.spmm import (
    _words_from_registers,
    explain_tile,
    lane_registers,
    locate_element,
    round_tf32,
    spmm_2to4,
)

BF16 = np.dtype(ml_dtypes.bfloat16)
U = 2.0**-24  # unit roundoff of float32


def finite_sparse(rng, dtype, m, k, scale=1.0):
    """A valid 2:4 (float32: 1:2) matrix of finite values (int8: full range)."""
    spec = layout_spec(dtype)
    if np.dtype(dtype) == np.int8:
        x = rng.integers(-128, 128, size=(m, k)).astype(np.int8)
    else:
        x = (rng.standard_normal((m, k)) * scale).astype(np.float32).astype(dtype)
    g = spec.group
    order = np.argsort(rng.random((m, k // g, g)), axis=-1)
    keep = rng.integers(0, spec.kept + 1, size=(m, k // g, 1))
    x.reshape(m, k // g, g)[np.argsort(order, axis=-1) >= keep] = 0
    return x


def random_b(rng, dtype, k, n):
    if np.dtype(dtype) == np.int8:
        return rng.integers(-128, 128, size=(k, n)).astype(np.int8)
    return rng.standard_normal((k, n)).astype(np.float32).astype(dtype)


ALL = (np.dtype(np.float16), BF16, np.dtype(np.int8), np.dtype(np.float32))


@st.composite
def spmm_case(draw, dtypes=ALL):
    dtype = draw(st.sampled_from(dtypes))
    spec = layout_spec(dtype)
    m = spec.m_multiple * draw(st.integers(1, 3))
    k = spec.k_multiple * draw(st.integers(1, 4))
    n = draw(st.integers(1, 20))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return finite_sparse(rng, dtype, m, k), random_b(rng, dtype, k, n)


# --------------------------------------------------------------------------- correctness
@given(spmm_case(dtypes=(np.dtype(np.int8),)))
def test_int8_is_bit_exact_with_a_dense_integer_matmul(case):
    a, b = case
    values, meta = compress_2to4(a)
    y = spmm_2to4(values, meta, b)
    assert y.dtype == np.int32
    assert np.array_equal(y, a.astype(np.int32) @ b.astype(np.int32))


@given(spmm_case(dtypes=(np.dtype(np.float16), BF16)))
def test_fp16_bf16_within_float32_summation_bound(case):
    """Products of fp16/bf16 values are exact in float32, so the only error is float32
    summation of k/2 terms: |y - exact| <= (k/2) u sum|a_i b_i| (recursive-summation bound
    gamma_n ~ n u, n = number of additions <= k/2)."""
    a, b = case
    values, meta = compress_2to4(a)
    y = spmm_2to4(values, meta, b)
    assert y.dtype == np.float32
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = a64 @ b64
    bound = (a.shape[1] / 2) * U * (np.abs(a64) @ np.abs(b64)) * 1.0001
    assert np.all(np.abs(y - exact) <= bound)


@given(spmm_case(dtypes=(np.dtype(np.float32),)), st.sampled_from(["rna", "rz"]))
def test_tf32_rounds_inputs_then_sums_in_float32(case, mode):
    a, b = case
    values, meta = compress_2to4(a)
    y = spmm_2to4(values, meta, b, tf32=mode)
    a64 = round_tf32(a, mode).astype(np.float64)
    b64 = round_tf32(b, mode).astype(np.float64)
    bound = (a.shape[1] / 2) * U * (np.abs(a64) @ np.abs(b64)) * 1.0001
    assert np.all(np.abs(y - a64 @ b64) <= bound)


def test_tf32_rounding_changes_the_result_and_none_does_not_round():
    rng = np.random.default_rng(2)
    a = finite_sparse(rng, np.float32, 32, 32)
    b = random_b(rng, np.float32, 32, 8)
    values, meta = compress_2to4(a)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    err_none = np.abs(spmm_2to4(values, meta, b, tf32="none") - exact).max()
    err_rna = np.abs(spmm_2to4(values, meta, b, tf32="rna") - exact).max()
    assert err_none < 1e-5 < err_rna  # tf32 keeps 11 significant bits: errors ~1e-3


@given(spmm_case(), st.data())
def test_single_nonzero_lands_in_the_right_row_and_column(case, data):
    a, b = case
    spec = layout_spec(a.dtype)
    r = data.draw(st.integers(0, a.shape[0] - 1))
    c = data.draw(st.integers(0, a.shape[1] - 1))
    single = np.zeros_like(a)
    single[r, c] = a.dtype.type(3) if spec.name != "bfloat16" else np.array(3, dtype=BF16)
    values, meta = compress_2to4(single)
    y = spmm_2to4(values, meta, b, tf32="none")
    expected = np.zeros(y.shape, dtype=y.dtype)
    expected[r] = 3 * b[c].astype(y.dtype)
    assert np.array_equal(y, expected)


@given(spmm_case())
def test_numba_kernel_equals_numpy_reference_bit_for_bit(case):
    a, b = case
    values, meta = compress_2to4(a)
    y_numba = spmm_2to4(values, meta, b, impl="numba")
    y_numpy = spmm_2to4(values, meta, b, impl="numpy")
    assert np.array_equal(y_numba.view(np.uint32), y_numpy.view(np.uint32))


@given(spmm_case())
def test_lane_decoding_equals_the_procedural_reorder(case):
    """Two independent derivations of the row-major words: the lanes each selector reads
    (LAYOUT.md 3.5 per-lane map) and the inverse of CUTLASS's reorder_meta."""
    a, _ = case
    _, meta = compress_2to4(a)
    spec = layout_spec(a.dtype)
    words = _words_from_registers(lane_registers(meta), spec)
    assert np.array_equal(words, meta_rowmajor(meta))


# --------------------------------------------------------------------------- tf32 rounding
def _round_tf32_reference(x, mode):
    """Independent float64 construction: keep 11 significant bits."""
    mant, exp = np.frexp(x.astype(np.float64))  # x = mant * 2**exp, 0.5 <= |mant| < 1
    scaled = mant * 2.0**11
    if mode == "rna":
        scaled = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)
    else:
        scaled = np.trunc(scaled)
    return np.ldexp(scaled / 2.0**11, exp).astype(np.float32)


@pytest.mark.parametrize("mode", ["rna", "rz"])
def test_round_tf32_matches_an_independent_construction(mode):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(20000) * 10.0 ** rng.integers(-30, 30, 20000)).astype(np.float32)
    ties = np.float32(1 + 2.0**-11) * np.array([1, -1, 4], dtype=np.float32)
    x = np.concatenate([x, ties])
    assert np.array_equal(round_tf32(x, mode), _round_tf32_reference(x, mode))
    expected = [1 + 2**-10, -(1 + 2**-10), 4 + 2**-8] if mode == "rna" else [1.0, -1.0, 4.0]
    assert round_tf32(ties, mode).tolist() == expected


def test_round_tf32_special_values():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, np.finfo(np.float32).max], dtype=np.float32)
    r = round_tf32(x, "rna")
    assert np.isposinf(r[0]) and np.isneginf(r[1]) and np.isnan(r[2])
    assert r[3:5].view(np.uint32).tolist() == [0, 0x80000000]
    assert np.isposinf(r[5])  # rounds past the largest tf32 -> overflow
    assert round_tf32(x, "rz")[5] == np.float32(2.0**128 * (1 - 2.0**-11))  # largest tf32


# --------------------------------------------------------------------------- inspection
@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.float32])
def test_explain_tile_covers_every_value_once_and_shows_registers(dtype):
    rng = np.random.default_rng(6)
    spec = layout_spec(dtype)
    a = finite_sparse(rng, dtype, 2 * spec.m_multiple, 2 * spec.k_multiple)
    values, meta = compress_2to4(a)
    ex = explain_tile(values, meta, 1, 1)
    regs = lane_registers(meta)[1, 1]
    assert [li.register for li in ex.lanes] == [int(r) for r in regs]
    seen = [(r, c) for li in ex.lanes for tile in li.fragments for _, r, c, _ in tile]
    r0, r1 = ex.rows
    c0, c1 = ex.dense_cols
    dense = decompress_2to4(values, meta)
    stored = {(r, c) for r in range(r0, r1) for c in range(c0, c1)}
    assert len(seen) == len(set(seen)) == (r1 - r0) * (c1 - c0) // 2
    assert set(seen) <= stored
    for li in ex.lanes:
        for tile in li.fragments:
            for _, r, c, v in tile:
                assert dense[r, c] == v or (np.isnan(v) and np.isnan(dense[r, c]))
    text = str(ex)
    assert f"0x{int(regs[5]):08X}" in text and spec.instruction in text
    word_mask = 0xFFFF if spec.meta_dtype.itemsize == 2 else 0xFFFFFFFF
    assert meta.reshape(-1)[ex.meta_flat_words[0]] == (int(regs[0]) & word_mask)


@given(spmm_case(), st.data())
def test_locate_element_agrees_with_the_layout(case, data):
    a, _ = case
    spec = layout_spec(a.dtype)
    values, meta = compress_2to4(a)
    r = data.draw(st.integers(0, a.shape[0] - 1))
    c = data.draw(st.integers(0, a.shape[1] - 1))
    loc = locate_element(values, meta, r, c)
    if a[r, c] != 0:
        assert loc.stored and values[r, loc.values_col] == a[r, c]
    chunk = loc.flat_index // (128 // spec.meta_dtype.itemsize)
    reg = int(lane_registers(meta).reshape(-1, 32)[chunk, loc.lane])
    assert reg == loc.register
    hi, lo = loc.register_bits
    field = (reg >> lo) & ((1 << (hi - lo + 1)) - 1)
    if loc.stored and spec.group == 4:
        assert field == c % 4
    elif spec.group == 2:
        assert field == loc.nibble
    assert "A[" in str(loc)


def test_bad_spmm_inputs():
    rng = np.random.default_rng(7)
    a = finite_sparse(rng, np.float16, 32, 32)
    values, meta = compress_2to4(a)
    with pytest.raises(TypeError, match="dtype of values"):
        spmm_2to4(values, meta, np.zeros((32, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="32 rows"):
        spmm_2to4(values, meta, np.zeros((16, 4), dtype=np.float16))
    with pytest.raises(ValueError, match="unknown tf32"):
        spmm_2to4(values, meta, np.zeros((32, 4), dtype=np.float16), tf32="rn")
    with pytest.raises(TypeError, match="raw uint16"):
        spmm_2to4(values.view(np.uint16), meta, np.zeros((32, 4), dtype=np.uint16))
    with pytest.raises(ValueError, match="row_block"):
        explain_tile(values, meta, 1, 0)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("corruption", ["zeros", "random", "one-nibble"])
def test_corrupt_metadata_is_refused_like_decompress(dtype, corruption):
    """Issue 10: spmm_2to4 multiplied with all-zero or random meta words and returned
    numbers off by up to 47; it must refuse what decompress_2to4 refuses, same message."""
    rng = np.random.default_rng(11)
    spec = layout_spec(dtype)
    a = finite_sparse(rng, dtype, 2 * spec.m_multiple, 2 * spec.k_multiple)
    values, meta = compress_2to4(a)
    bad = meta.copy()
    if corruption == "zeros":
        bad[...] = 0
    elif corruption == "random":
        bad = rng.integers(0, np.iinfo(meta.dtype).max, size=meta.shape,
                           dtype=meta.dtype, endpoint=True)
    else:  # one invalid nibble in the last word: the check must cover every word
        bad.ravel()[-1] = (bad.ravel()[-1] & ~meta.dtype.type(0xF)) | meta.dtype.type(0x0)
    b = random_b(rng, dtype, a.shape[1], 3)
    with pytest.raises(ValueError) as from_decompress:
        decompress_2to4(values, bad)
    for impl in ("numba", "numpy"):
        with pytest.raises(ValueError, match="meta holds nibble") as from_spmm:
            spmm_2to4(values, bad, b, impl=impl)
        assert str(from_spmm.value) == str(from_decompress.value)
    spmm_2to4(values, meta, b)  # the valid metadata still multiplies
