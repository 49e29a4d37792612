"""N:M convolutions from the kept weights: a conv is a Linear on its column matrix, so its
forward and input-gradient products run on stepsim.nn.nm_linear's kernels when handed the
weight matrix's SparseWeight. They give the bits of the NumPy references (the im2col /
col2im references around nm_linear's product references), agree with the dense products
of the masked weight to rounding, the weight gradient stays the dense one bit for bit, and
the CNN takes them where the conv's rule says so when a step hands it its masks."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import OPT_DTYPES

from stepsim.core.masks import nm_mask
from stepsim.nn import conv as C
from stepsim.nn import nm_linear as NL


@st.composite
def sparse_conv_case(draw):
    """(x, w, b, mask, n, m, stride, padding, dout): an N:M conv's operands, the mask over
    groups of m input channels at each tap (w (C_out, K, C_in), C_in a multiple of m).
    Column-matrix rows cross the 32 / 16-row tiles of the sparse kernel."""
    n, m = draw(st.sampled_from([(1, 1), (2, 4), (1, 4), (3, 8), (1, 8), (1, 16), (2, 3)]))
    dtype = draw(st.sampled_from(OPT_DTYPES))
    batch, k = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    stride, padding = draw(st.integers(1, 3)), draw(st.integers(0, 2))
    length = draw(st.integers(max(1, k - 2 * padding), 24))
    c_in = m * draw(st.integers(1, max(1, 32 // m)))
    c_out = draw(st.integers(1, 20))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):  # small integers: exact sums, many ties in the mask
        def fill(*shape):
            return rng.integers(-3, 4, size=shape).astype(dtype)
    else:
        def fill(*shape):
            return rng.standard_normal(shape).astype(dtype)
    w = fill(c_out, k, c_in)
    mask = nm_mask(w, n, m, axis=-1)
    l_out = C.output_length(length, k, stride, padding)
    return (fill(batch, length, c_in), w, fill(c_out), mask, n, m, stride, padding,
            fill(batch, l_out, c_out))


def _masked(w, mask):
    return np.where(mask, w, w.dtype.type(0))


def _sparse(w, mask, n, m):
    """The SparseWeight of w's (C_out, K * C_in) matrix at the mask's entries."""
    return NL.pack(w.reshape(w.shape[0], -1), mask.reshape(w.shape[0], -1), n, m)


def _close(got, terms_abs, exact, dtype, terms):
    """|got - exact| within a sum of ``terms`` products' rounding: terms * eps * sum |.|."""
    eps = np.finfo(dtype).eps
    assert np.all(np.abs(got - exact) <= 2 * (terms + 1) * eps * terms_abs
                  + np.finfo(dtype).tiny)


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(sparse_conv_case())
def test_sparse_conv_products_give_the_references_bits_and_the_dense_ones_to_rounding(case):
    x, w, b, mask, n, m, stride, padding, dout = case
    wd = _masked(w, mask)
    sw = _sparse(w, mask, n, m)
    out, cache = C.conv1d_forward(x, wd, b, stride, padding, matrices=(sw, sw))
    dx, dw, db = C.conv1d_backward(dout, cache)
    # the NumPy references: the gather, nm_linear's product references, the scatter
    cols = C.im2col_reference(x, w.shape[1], stride, padding)
    cols2 = cols.reshape(-1, sw.shape[1])
    want = NL.product_reference(cols2, sw) + b
    assert out.tobytes() == want.reshape(out.shape).tobytes()
    dout2 = dout.reshape(-1, w.shape[0])
    want_dx = C.col2im_reference(NL.input_grad_reference(dout2, sw).reshape(cols.shape),
                                 x.shape[1], stride, padding)
    assert dx.tobytes() == want_dx.tobytes()
    # the dense products of the masked weight, to rounding; the weight gradient the same bits
    ref_out, ref_cache = C.conv1d_forward(x, wd, b, stride, padding)
    ref_dx, ref_dw, ref_db = C.conv1d_backward(dout, ref_cache)
    wmat = wd.reshape(w.shape[0], -1).astype(np.float64)
    exact = cols2.astype(np.float64) @ wmat.T + b
    bound = np.abs(cols2).astype(np.float64) @ np.abs(wmat).T + np.abs(b)
    for got in (out, ref_out):
        _close(got.reshape(exact.shape), bound, exact, x.dtype, sw.values.shape[1])
    exact_dcols = dout2.astype(np.float64) @ wmat
    bound_dcols = np.abs(dout2).astype(np.float64) @ np.abs(wmat)
    exact_dx = C.col2im_reference(exact_dcols.reshape(cols.shape), x.shape[1], stride, padding)
    bound_dx = C.col2im_reference(bound_dcols.reshape(cols.shape), x.shape[1], stride, padding)
    for got in (dx, ref_dx):  # a position sums up to K taps of C_out products each
        _close(got, bound_dx, exact_dx, x.dtype, w.shape[0] * w.shape[1])
    assert dw.tobytes() == ref_dw.tobytes() and db.tobytes() == ref_db.tobytes()


def test_an_integer_conv_is_exact_and_the_rounding_check_can_fail():
    rng = np.random.default_rng(5)
    w = rng.integers(-3, 4, size=(8, 3, 16)).astype(np.float32)
    mask = nm_mask(w, 1, 8, axis=-1)
    x = rng.integers(-3, 4, size=(40, 20, 16)).astype(np.float32)  # 400 column rows
    wd = _masked(w, mask)
    sw = _sparse(w, mask, 1, 8)
    out, cache = C.conv1d_forward(x, wd, None, 2, 1, matrices=(sw, sw))
    ref_out, ref_cache = C.conv1d_forward(x, wd, None, 2, 1)
    assert np.array_equal(out, ref_out)
    dout = rng.integers(-3, 4, size=out.shape).astype(np.float32)
    assert np.array_equal(C.conv1d_backward(dout, cache)[0],
                          C.conv1d_backward(dout, ref_cache)[0])
    cols2 = C.im2col_reference(x, 3, 2, 1).reshape(-1, 48).astype(np.float64)
    with pytest.raises(AssertionError):  # the unmasked product is not within rounding
        unmasked = C.conv1d_forward(x, w, None, 2, 1)[0].reshape(-1, 8)
        exact = cols2 @ wd.reshape(8, -1).T.astype(np.float64)
        _close(unmasked, np.abs(cols2) @ np.abs(wd.reshape(8, -1).T), exact, np.float32, 6)


def test_matrices_of_another_shape_or_dtype_are_refused():
    x = np.ones((2, 8, 4), np.float32)
    w = np.ones((3, 3, 4), np.float32)
    with pytest.raises(ValueError, match=r"matrices' forward weight must be w's \(3, 12\)"):
        C.conv1d_forward(x, w, None, matrices=(np.ones((3, 4), np.float32),) * 2)
    with pytest.raises(ValueError, match="backward weight .* float32, got .* float64"):
        C.conv1d_forward(x, w, None, matrices=(w.reshape(3, -1), np.ones((3, 12))))
    with pytest.raises(TypeError, match="forward weight must be an ndarray or a SparseWeight"):
        C.conv1d_forward(x, w, None, matrices=([[1.0] * 12] * 3, w.reshape(3, -1)))


def test_the_conv_rule_at_the_cnns_shapes():
    # MNIST-1D at 16 channels, batch 64: column matrices (16, 48) of 640 and 320 rows; too
    # little work a product (the Linear's rule alone would take most of them)
    for rows in (640, 320):
        for n, m in ((2, 4), (1, 4), (1, 8)):
            assert not C.sparse_pays(rows, 16, 48, n, m)
            assert not C.sparse_pays(rows, 48, 16, n, m)
        assert NL.sparse_pays(rows, 16, 48, 1, 8) and NL.sparse_pays(rows, 48, 16, 1, 8)
    # 32 channels, batch 128 (1280 and 640 rows of 96 columns): both products at an eighth
    # or less
    for rows in (1280, 640):
        for n, m in ((1, 8), (2, 16)):
            assert C.sparse_pays(rows, 32, 96, n, m) and C.sparse_pays(rows, 96, 32, n, m)
        for n, m in ((2, 4), (1, 4), (2, 8)):
            assert not C.sparse_pays(rows, 32, 96, n, m)
    assert not C.sparse_pays(1 << 16, 96, 16, 1, 8)  # 16 channels: too narrow at any batch


def _spy(monkeypatch):
    """Record the output shape of every sparse kernel call (each runs the real kernel)."""
    from stepsim.nn import _nm_kernels as K

    calls, real = [], K.sparse_product

    def counted(*args):
        calls.append(args[-1].shape)
        return real(*args)

    monkeypatch.setattr(K, "sparse_product", counted)
    return calls


@pytest.mark.parametrize("channels, batch, n, m, want", [
    # 32 channels, batch 128: conv2's and conv3's forward, then their input gradients
    # (conv3's first); conv1 (1 input channel) dense, the head always dense
    ((32, 32, 32), 128, 1, 8, [(1280, 32), (640, 32), (640, 96), (1280, 96)]),
    ((32, 32, 32), 128, 1, 4, []),
    ((16, 16, 16), 64, 1, 8, []),  # the problem's model: the conv rule keeps it dense
])
def test_the_cnn_takes_the_sparse_conv_products_where_the_rule_says(monkeypatch, channels,
                                                                     batch, n, m, want):
    from stepsim.nn.cnn import CNN

    cnn = CNN(length=40, channels=channels, kernel_sizes=3, nm=(n, m))
    params = cnn.init_params(0)
    specs = cnn.specs()
    masks = {k: nm_mask(w, n, m, axis=-1) for k, w in params.items() if specs[k].sparse}
    plain = {k: _masked(w, masks[k]) if k in masks else w for k, w in params.items()}
    fwd = NL.ForwardWeights(plain, masks, dict.fromkeys(masks, (n, m)))
    x = np.random.default_rng(1).standard_normal((batch, 40, 1)).astype(np.float32)
    labels = np.arange(batch) % 10
    calls = _spy(monkeypatch)
    loss, grads = cnn.loss_and_grad(fwd, x, labels)
    assert calls == want
    loss_ref, grads_ref = cnn.loss_and_grad(plain, x, labels)
    composed = cnn.loss_and_grad(fwd, x, labels, kernels=False)  # the layers' path
    assert composed[0] == loss
    for k in grads:
        assert grads[k].tobytes() == composed[1][k].tobytes(), k
        np.testing.assert_allclose(grads[k], grads_ref[k], rtol=1e-4,
                                   atol=1e-5 * np.abs(grads_ref[k]).max())
    assert abs(loss - loss_ref) <= 1e-5 * loss_ref
    same = all(grads[k].tobytes() == grads_ref[k].tobytes() for k in grads)
    assert same == (not want)  # sparse sums: other last bits; dense: OpenBLAS's own


def test_a_step_hands_the_cnn_its_conv_masks():
    from stepsim.problems import make_problem
    from stepsim.recipes import make_recipe
    from stepsim.training import FitRun

    problem = make_problem("mnist1d", channels=(16, 16), n_train=200, n_validation=40,
                           n_test=50, batch_size=16, nm=(1, 4))
    run = FitRun(problem, make_recipe("sr-ste", lr=1e-3), 10, rng=0)
    fwd, _ = run.stepper.forward(run.state, run.params, 1, run.ctx)
    assert isinstance(fwd, NL.ForwardWeights)
    assert set(fwd.masks) == {"conv2.w", "head.w"} and fwd.nm["conv2.w"] == (1, 4)
    assert fwd.masks["conv2.w"].shape == (16, 3, 16)
    f, b = NL.weights_for(fwd, "conv2.w", 16 * 10, lambda *shape_and_nm: True)
    assert isinstance(f, NL.SparseWeight) and f.shape == (16, 48) and b is f
    assert f.dense().tobytes() == fwd["conv2.w"].reshape(16, 48).tobytes()
    f, b = NL.weights_for(fwd, "conv2.w", 16 * 10, C.sparse_pays)  # too small: dense
    assert b is f and f.shape == (16, 48) and f.base is fwd["conv2.w"]  # w's matrix, a view
