"""fit's once-a-step finiteness check (stepsim.core.finite.has_non_finite and its numba kernel
core._step_kernels.has_non_finite) against NumPy's isfinite, across shapes, dtypes, layouts
and where the bad value sits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from stepsim.core.finite import FiniteCheck, has_non_finite
from stepsim.training import _first_non_finite, _first_non_finite_weight

DTYPES = [np.float16, np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
def test_kernel_agrees_with_isfinite(dtype, data):
    """Any shape (0-d and empty included), finite values with NaN / +-inf placed anywhere,
    C-ordered or a strided view: the same answer as ``not np.isfinite(x).all()``."""
    x = data.draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0,
                                                     max_side=40),
                             elements=st.floats(-1e4, 1e4, width=np.dtype(dtype).itemsize * 8)))
    if x.size:
        for _ in range(data.draw(st.integers(0, 3))):
            i = data.draw(st.integers(0, x.size - 1))
            x.reshape(-1)[i] = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    if data.draw(st.booleans()) and x.ndim >= 1:
        x = x[..., ::2]  # not contiguous: the NumPy path
    assert has_non_finite(x) == (not np.isfinite(x).all())


def test_a_sum_that_overflows_is_still_finite():
    """Finite float32 values whose sum overflows to inf: finite (the old sum-first check
    had to re-check element-wise for exactly this case)."""
    x = np.full(1000, 3e38, dtype=np.float32)
    with np.errstate(over="ignore"):
        assert not np.isfinite(x.sum())
    assert not has_non_finite(x)


def test_first_non_finite_names_the_parameter_and_counts():
    grads = {"w1": np.zeros((4, 4), np.float32), "w2": np.array([1.0, np.inf, np.nan],
                                                                np.float32)}
    what, where = _first_non_finite(0.5, grads)
    assert where == "w2" and "2 non-finite value(s)" in what
    what, where = _first_non_finite(float("nan"), grads)
    assert where == "w2" and what.startswith("the loss is nan")
    assert _first_non_finite(0.5, {"w1": grads["w1"]}) == (None, None)
    what, where = _first_non_finite_weight({"a": np.ones(3), "b": np.array([np.inf])})
    assert where == "b" and "1 non-finite value(s)" in what


def _first_bad_reference(arrays):
    for i, x in enumerate(arrays):
        if not np.isfinite(x).all():
            return i
    return -1


@given(data=st.data())
def test_one_call_over_many_arrays_finds_the_first_bad_one(data):
    """FiniteCheck (one first_non_finite kernel call over the arrays' address table, or
    the per-array path when one is not a C-contiguous float32/float64 array): the index
    of the first array that np.isfinite finds bad, whatever the mix of dtypes and shapes
    (0-d and empty included)."""
    arrays = []
    for _ in range(data.draw(st.integers(1, 6))):
        dtype = data.draw(st.sampled_from([np.float32, np.float64]))
        x = data.draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0,
                                                         max_side=30),
                                 elements=st.floats(-1e3, 1e3, width=np.dtype(dtype).itemsize
                                                    * 8)))
        if x.size and data.draw(st.booleans()):
            i = data.draw(st.integers(0, x.size - 1))
            x.reshape(-1)[i] = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]))
        arrays.append(x)
    if data.draw(st.integers(0, 4)) == 0:
        arrays.append(np.zeros((4, 4), np.float32)[:, ::2])  # not contiguous: per array
    assert FiniteCheck().first(arrays) == _first_bad_reference(arrays)


def test_the_kept_table_reads_the_arrays_again_and_follows_new_ones():
    """The weights' check keeps its table while the same arrays come back; it reads
    their values at every call, and new arrays (or another layout) make a new table."""
    check = FiniteCheck()
    a, b = np.zeros(5, np.float32), np.zeros((3, 2))
    assert check.first([a, b]) == -1
    b[1, 1] = np.inf  # in place: the same arrays, read again
    assert check.first([a, b]) == 1
    a[0] = np.nan
    assert check.first([a, b]) == 0
    c = np.ones(2, np.float32)
    assert check.first([c, b]) == 1
    assert check.first([c]) == -1
    assert check.first([np.array([1.0, np.nan], np.float16), c]) == 0  # float16: per array
