"""General N:M storage: lossless round trips, exact byte accounting, packed index format."""

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepsim import apply_nm
from stepsim.sparse24.nm_storage import NMCompressed, compress_nm, decompress_nm, index_bits

DTYPES = (np.float16, np.float32, np.float64, ml_dtypes.bfloat16, np.int8, np.int32)
BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@st.composite
def nm_sparse(draw):
    """(x, n, m, axis): arbitrary bit patterns with at most n non-zeros per group."""
    m = draw(st.one_of(st.sampled_from([1, 2, 4, 8, 16, 32]), st.integers(1, 20)))
    n = draw(st.integers(1, m))
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    ndim = draw(st.integers(1, 3))
    shape = [draw(st.integers(1, 4)) for _ in range(ndim)]
    axis = draw(st.integers(-ndim, ndim - 1))
    shape[axis] = m * draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    ubits = BITS[dtype.itemsize]
    x = rng.integers(0, np.iinfo(ubits).max, size=shape, dtype=ubits, endpoint=True)
    moved = np.moveaxis(x, axis, -1)  # a view: writes go to x
    keep = rng.integers(0, n + 1, size=moved.shape[:-1] + (moved.shape[-1] // m, 1))
    order = np.argsort(np.argsort(rng.random(moved.shape[:-1] + (moved.shape[-1] // m, m)), -1), -1)
    grouped = moved.reshape(moved.shape[:-1] + (moved.shape[-1] // m, m))
    zero_it = order >= keep
    grouped[zero_it] = 0
    moved[...] = grouped.reshape(moved.shape)
    return x.view(dtype), n, m, axis


@given(nm_sparse())
def test_round_trip_is_lossless_and_compresses(case):
    x, n, m, axis = case
    c = compress_nm(x, n, m, axis)
    groups = x.size // m
    assert c.values.shape == (groups, n) and c.values.dtype == x.dtype
    assert c.indices.nbytes == math.ceil(groups * n * index_bits(m) / 8)
    assert c.nbytes == groups * n * x.dtype.itemsize + c.indices.nbytes
    back = decompress_nm(c)
    assert back.shape == x.shape and back.dtype == x.dtype
    ub = BITS[x.dtype.itemsize]
    # the only thing that may differ: an unstored negative zero comes back +0
    differ = back.view(ub) != x.view(ub)
    if differ.any():
        assert x.dtype.kind == "V" or x.dtype.kind == "f"
        assert np.all(x[differ] == 0) and np.all(back.view(ub)[differ] == 0)


def test_packed_index_format_is_little_endian_bits():
    x = np.zeros((1, 16), dtype=np.float32)
    x[0, [3, 10]] = [1.0, 2.0]
    c = compress_nm(x, 2, 16)
    assert c.values.tolist() == [[1.0, 2.0]]
    assert c.indices.tolist() == [3 | (10 << 4)]
    y = np.zeros((1, 8), dtype=np.float16)
    y[0, [1, 6]] = [5, 7]  # one group of 8: 3-bit indices 1 and 6
    c = compress_nm(y, 2, 8)
    assert c.indices.tolist() == [1 | (6 << 3)]


def test_fewer_nonzeros_pad_with_lowest_zero_positions():
    x = np.array([[0.0, 0.0, 5.0, 0.0]], dtype=np.float32)
    c = compress_nm(x, 2, 4)
    assert c.values.tolist() == [[0.0, 5.0]]
    assert c.indices.tolist() == [0 | (2 << 2)]


@pytest.mark.parametrize("m,bits", [(1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (16, 4), (17, 5),
                                    (32, 5)])
def test_index_bits(m, bits):
    assert index_bits(m) == bits


def test_valid_input_from_apply_nm_and_refusal_of_dense_input():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 32)).astype(np.float32)
    c = compress_nm(apply_nm(w, 1, 16), 1, 16)
    assert np.array_equal(decompress_nm(c), apply_nm(w, 1, 16))
    assert "NMCompressed(1:16" in repr(c)
    with pytest.raises(ValueError,
                       match=r"not 1:16 sparse along axis 1: group 0 \(dense\[0, 0:16\]\)"):
        compress_nm(w, 1, 16)
    with pytest.raises(ValueError, match="not divisible"):
        compress_nm(w, 2, 5)
    with pytest.raises(ValueError, match="n must be <= m"):
        compress_nm(w, 5, 4)
    with pytest.raises(TypeError, match="numeric dtype"):
        compress_nm(w.astype(bool), 1, 4)
    with pytest.raises(TypeError, match="NMCompressed"):
        decompress_nm(w)


def test_corrupt_indices_are_reported():
    x = np.zeros((1, 4), dtype=np.float32)
    x[0, 1] = 1
    c = compress_nm(x, 2, 4)
    bad = NMCompressed(c.values, np.array([1 | (1 << 2)], dtype=np.uint8), c.shape, 2, 4, 1)
    with pytest.raises(ValueError, match="strictly increasing"):
        decompress_nm(bad)
    bad = NMCompressed(c.values[:, :1], np.array([5], dtype=np.uint8), c.shape, 1, 5, 1)
    with pytest.raises(ValueError, match="corrupt"):
        decompress_nm(bad)
