"""The fused dense-layer kernels (stepsim.nn._kernels: softmax cross-entropy, bias +
ReLU, ReLU backward + bias gradient, NumPy's pairwise sum) give the bits of their NumPy
references in stepsim.nn.layers, and their gradients match finite differences."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from stepsim.nn import fused as F
from stepsim.nn import layers as L
from tests.gradcheck import numeric_grad

DTYPES = st.sampled_from((np.float32, np.float64))


def _floats(dtype, special=True):
    width = np.dtype(dtype).itemsize * 8
    base = st.floats(-30, 30, width=width)
    return base | st.sampled_from([0.0, -0.0, 1e-30, -1e-30]) if special else base


def _bits(a):
    out = np.array(a, copy=True)
    out[np.isnan(out)] = np.nan  # only "NaN here" is promised (test_lean_step._bits)
    return out.tobytes()


@given(DTYPES, st.integers(0, 700), st.integers(0, 2**32 - 1))
def test_pairwise_sum_is_numpys_sum(dtype, n, seed):
    from stepsim.nn import _kernels as K

    a = (np.random.default_rng(seed).standard_normal(n) * 1e3).astype(dtype)
    # np.add.reduce starts from 0 and adds the pairwise sum (-0 sums to +0 there)
    assert np.asarray(dtype(0) + K.pairwise_sum(a)).tobytes() == np.sum(a).tobytes()


@st.composite
def xent_case(draw):
    dtype = draw(DTYPES)
    rows = draw(st.integers(1, 40))
    c = draw(st.sampled_from([1, 2, 7, 8, 9, 10, 16, 64, 129, 300]))
    logits = draw(hnp.arrays(dtype, (rows, c), elements=_floats(dtype)))
    labels = draw(hnp.arrays(np.int64, rows, elements=st.integers(0, c - 1)))
    return logits, labels


@given(xent_case())
def test_softmax_cross_entropy_kernel_gives_the_references_bits(case):
    logits, labels = case
    want = L.softmax_cross_entropy(logits, labels)
    got = F.softmax_cross_entropy(logits, labels)
    assert repr(got[0]) == repr(want[0])
    assert got[1].dtype == want[1].dtype and _bits(got[1]) == _bits(want[1])


def test_softmax_cross_entropy_kernel_on_3d_logits_and_bad_labels():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((3, 5, 16)).astype(np.float32)
    labels = rng.integers(0, 16, (3, 5))
    want, got = L.softmax_cross_entropy(logits, labels), F.softmax_cross_entropy(logits, labels)
    assert got[0] == want[0] and got[1].tobytes() == want[1].tobytes()
    assert got[1].shape == logits.shape
    labels[1, 2] = 16
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 16\)"):
        F.softmax_cross_entropy(logits, labels)
    with pytest.raises(TypeError, match="labels"):
        F.softmax_cross_entropy(logits, labels.astype(np.float32))


def test_softmax_cross_entropy_kernel_gradient_matches_finite_differences():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((6, 9))
    labels = rng.integers(0, 9, 6)
    _, grad = F.softmax_cross_entropy(logits, labels)
    numeric = numeric_grad(lambda: F.softmax_cross_entropy(logits, labels)[0], logits)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


@st.composite
def dense_case(draw):
    dtype = draw(DTYPES)
    rows = draw(st.integers(1, 20))
    d_in = draw(st.integers(1, 12))
    d_out = draw(st.integers(1, 20))
    x = draw(hnp.arrays(dtype, (rows, d_in), elements=_floats(dtype)))
    w = draw(hnp.arrays(dtype, (d_out, d_in), elements=_floats(dtype, special=False)))
    b = draw(hnp.arrays(dtype, d_out, elements=_floats(dtype)))
    dout = draw(hnp.arrays(dtype, (rows, d_out), elements=_floats(dtype)))
    return x, w, b, dout, draw(st.booleans())


@given(dense_case())
@settings(max_examples=60)
def test_linear_relu_and_its_backward_give_the_references_bits(case):
    x, w, b, dout, has_bias = case
    b = b if has_bias else None
    want, _ = L.linear_forward(x, w, b)
    np.maximum(want, 0, out=want)
    got, cache = F.linear_relu_forward(x, w, b)
    assert _bits(got) == _bits(want)
    assert cache.has_bias == has_bias and cache.w is w and cache.x is x
    d_want = np.multiply(dout, want > 0)
    db_want = d_want.sum(axis=0) if has_bias else None
    d_got, db_got = F.relu_backward_bias_grad(dout.copy(), got, has_bias)
    assert _bits(d_got) == _bits(d_want)
    if has_bias:
        assert _bits(db_got) == _bits(db_want)
    else:
        assert db_got is None


def test_mlp_with_the_fused_kernels_matches_finite_differences():
    from stepsim.nn.mlp import MLP

    mlp = MLP((5, 7, 6, 3), sparsify="none")
    params = mlp.init_params(0, dtype=np.float64)
    params = {k: v + 0.1 for k, v in params.items()}  # biases away from 0
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 5))
    y = rng.integers(0, 3, 4)

    def loss():
        return F.softmax_cross_entropy(mlp.forward(params, x)[0], y)[0]

    logits, cache = mlp.forward(params, x)
    grads = mlp.backward(F.softmax_cross_entropy(logits, y)[1], cache)
    for name, p in params.items():
        np.testing.assert_allclose(grads[name], numeric_grad(loss, p), rtol=1e-5,
                                   atol=1e-7, err_msg=name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_loss_sums_keep_the_references_bits_around_numpys_cast_buffer(dtype):
    """The loss's two float64 sums run in the kernel while they are one pairwise sum in
    NumPy (float32 rows up to np.getbufsize(), which casts in chunks beyond it; float64
    any length): the reference's bits on both sides of that size."""
    rng = np.random.default_rng(5)
    size = np.getbufsize()
    for rows in (1, 7, 129, size - 1, size, size + 1, 2 * size + 13):
        logits = (rng.standard_normal((rows, 3)) * 4).astype(dtype)
        labels = rng.integers(0, 3, rows)
        want = L.softmax_cross_entropy(logits, labels)
        got = F.softmax_cross_entropy(logits, labels)
        assert repr(got[0]) == repr(want[0]), rows
        assert _bits(got[1]) == _bits(want[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [1, 7, 128, 1000])
@pytest.mark.parametrize("cols", [1, 2, 10, 64])
def test_output_layer_bias_gradient_is_numpys_sum_over_rows(dtype, rows, cols):
    """The MLP's output-layer bias gradient on the rows_sum kernel: the bits of
    ``d.sum(axis=0)`` (-0 entries and a single column, NumPy's pairwise case, included)."""
    from stepsim.nn.mlp import _rows_sum

    rng = np.random.default_rng(rows * cols)
    d = (rng.standard_normal((rows, cols)) * 10.0 ** rng.uniform(-4, 4, (rows, cols)))
    d = d.astype(dtype)
    d[rng.random((rows, cols)) < 0.2] = -0.0
    assert _bits(_rows_sum(d)) == _bits(d.sum(axis=0))
    assert _bits(_rows_sum(d[:, ::2])) == _bits(d[:, ::2].sum(axis=0))  # NumPy's path
