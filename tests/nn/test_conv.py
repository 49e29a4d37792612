"""stepsim.nn.conv and stepsim.nn.cnn: the gather/scatter kernels against their NumPy
references (bits), the layer's and the model's gradients against central finite
differences (float64) and torch autograd, the fused model path against the composed
layers, and bad input."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepsim.nn import conv as C
from stepsim.nn.cnn import CNN
from tests.gradcheck import numeric_grad

DTYPES = st.sampled_from((np.float32, np.float64))


@st.composite
def geometry(draw):
    """(B, L, C_in, C_out, K, stride, padding) of a valid conv (L_out >= 1), by construction."""
    k = draw(st.integers(1, 5))
    padding = draw(st.integers(0, 3))
    length = max(1, k - 2 * padding) + draw(st.integers(0, 12))
    return (draw(st.integers(1, 3)), length, draw(st.integers(1, 5)), draw(st.integers(1, 4)),
            k, draw(st.integers(1, 3)), padding)


@given(geometry(), DTYPES, st.integers(0, 2**32 - 1))
def test_gather_and_scatter_kernels_give_the_references_bits(geo, dtype, seed):
    batch, length, c_in, _c_out, k, stride, padding = geo
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, length, c_in)).astype(dtype)
    cols = C.im2col(x, k, stride, padding)
    want = C.im2col_reference(x, k, stride, padding)
    assert cols.shape == (batch, C.output_length(length, k, stride, padding), k, c_in)
    assert cols.dtype == dtype and cols.tobytes() == want.tobytes()
    dcols = rng.standard_normal(cols.shape).astype(dtype)
    dx = C.col2im(dcols, length, stride, padding)
    ref = C.col2im_reference(dcols, length, stride, padding)
    assert dx.shape == x.shape and dx.dtype == dtype and dx.tobytes() == ref.tobytes()
    # the scatter is the gather's adjoint: <im2col(x), y> = <x, col2im(y)>
    lhs = np.sum(cols.astype(np.float64) * dcols)
    rhs = np.sum(x.astype(np.float64) * C.col2im(dcols.astype(np.float64), length, stride,
                                                 padding))
    assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-9)


def test_gather_reads_the_right_positions():
    x = np.arange(1.0, 6.0).reshape(1, 5, 1)  # 1 2 3 4 5
    cols = C.im2col(x, 3, 2, 1)  # windows at -1..1, 1..3, 3..5
    np.testing.assert_array_equal(cols[0, :, :, 0], [[0, 1, 2], [2, 3, 4], [4, 5, 0]])


@given(geometry(), st.booleans(), st.integers(0, 2**32 - 1))
def test_conv_layer_gradients_match_finite_differences(geo, bias, seed):
    batch, length, c_in, c_out, k, stride, padding = geo
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, length, c_in))
    w = rng.standard_normal((c_out, k, c_in))
    b = rng.standard_normal(c_out) if bias else None
    out, cache = C.conv1d_forward(x, w, b, stride, padding)
    r = rng.standard_normal(out.shape)
    dx, dw, db = C.conv1d_backward(r, cache)
    f = lambda: float(np.sum(C.conv1d_forward(x, w, b, stride, padding)[0] * r))
    np.testing.assert_allclose(dx, numeric_grad(f, x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dw, numeric_grad(f, w), rtol=1e-6, atol=1e-8)
    if bias:
        np.testing.assert_allclose(db, numeric_grad(f, b), rtol=1e-6, atol=1e-8)
    else:
        assert db is None
    assert dx.flags.c_contiguous and dw.flags.c_contiguous
    assert C.conv1d_backward(r, cache, need_dx=False)[0] is None


def test_conv_forward_is_the_direct_sum():
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((2, 9, 3)), rng.standard_normal((4, 3, 3)), rng.standard_normal(4)
    out, _ = C.conv1d_forward(x, w, b, 2, 1)
    padded = np.pad(x, ((0, 0), (1, 1), (0, 0)))
    want = np.stack([np.einsum("btc,otc->bo", padded[:, 2 * j:2 * j + 3], w) + b
                     for j in range(out.shape[1])], axis=1)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("call, match", [
    (lambda x, w: C.conv1d_forward(x, w[0], None), "3-D"),
    (lambda x, w: C.conv1d_forward(x[..., :2], w, None), "C_in"),
    (lambda x, w: C.conv1d_forward(x, w.astype(np.float32), None), "dtype"),
    (lambda x, w: C.conv1d_forward(x, w, None, stride=0), "stride"),
    (lambda x, w: C.conv1d_forward(x, w, None, padding=-1), "padding"),
    (lambda x, w: C.conv1d_forward(x[:, :1], w, None), "exceeds"),
    (lambda x, w: C.conv1d_forward(x, w, np.zeros(3)), "b must have shape"),
])
def test_bad_conv_input_names_the_argument(call, match):
    x, w = np.zeros((2, 6, 3)), np.zeros((4, 3, 3))
    with pytest.raises((ValueError, TypeError), match=match):
        call(x, w)


# ------------------------------------------------------------------------------- the model
def _perturbed(cnn, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return {k: (v + 0.1 * rng.standard_normal(v.shape)).astype(dtype)
            for k, v in cnn.init_params(rng, dtype).items()}


SMALL = {"length": 13, "channels": (4, 8, 4), "kernel_sizes": (3, 2, 5), "strides": (2, 1, 2),
         "classes": 3}


@pytest.mark.parametrize("kernels, bias", [(True, True), (False, True), (True, False)])
def test_model_gradient_matches_finite_differences(kernels, bias):
    cnn = CNN(**SMALL, bias=bias)
    params = _perturbed(cnn, 0)
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((4, 13, 1)), rng.integers(0, 3, 4)
    _loss, grads = cnn.loss_and_grad(params, x, y, kernels=kernels)
    assert list(grads) == list(cnn.shapes())
    f = lambda: cnn.loss_and_grad(params, x, y, kernels=kernels)[0]
    for name, value in params.items():
        assert grads[name].shape == value.shape and grads[name].dtype == np.float64
        np.testing.assert_allclose(grads[name], numeric_grad(f, value), rtol=1e-5, atol=1e-8,
                                   err_msg=name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_path_gives_the_composed_layers_bits(dtype):
    cnn = CNN(length=40, channels=(8, 8, 8), classes=10)
    params = _perturbed(cnn, 2, dtype)
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((16, 40, 1)).astype(dtype), rng.integers(0, 10, 16)
    before = {k: v.copy() for k, v in params.items()}
    loss_k, grads_k = cnn.loss_and_grad(params, x, y, kernels=True)
    loss_n, grads_n = cnn.loss_and_grad(params, x, y, kernels=False)
    assert repr(loss_k) == repr(loss_n)
    for name in grads_n:
        assert grads_k[name].dtype == dtype and grads_k[name].flags.c_contiguous
        np.testing.assert_array_equal(grads_k[name], grads_n[name], err_msg=name)
    assert all(np.array_equal(before[k], params[k]) for k in params)


@pytest.mark.torch
@pytest.mark.parametrize("bias", [True, False])
def test_model_matches_torch_autograd(bias):
    torch = pytest.importorskip("torch")
    from stepsim.bench._cnn_steps import params_as_torch, torch_model, torch_parameters

    cnn = CNN(length=20, channels=(8, 4, 8), kernel_sizes=(5, 3, 2), strides=(2, 1, 3),
              classes=5, bias=bias)
    params = _perturbed(cnn, 4)
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((6, 20, 1)), rng.integers(0, 5, 6)
    logits, _ = cnn.forward(params, x)
    loss, grads = cnn.loss_and_grad(params, x, y)
    model = torch_model(cnn, params)
    tlogits = model(torch.from_numpy(np.ascontiguousarray(x.transpose(0, 2, 1))))
    tloss = torch.nn.functional.cross_entropy(tlogits, torch.from_numpy(y))
    tloss.backward()
    np.testing.assert_allclose(logits, tlogits.detach().numpy(), rtol=1e-12, atol=1e-14)
    assert loss == pytest.approx(tloss.item(), rel=1e-13)
    ours = params_as_torch(grads, cnn)
    for name, tensor in torch_parameters(model, cnn).items():
        assert tensor.dtype == torch.float64
        np.testing.assert_allclose(ours[name], tensor.grad.numpy(), rtol=1e-11, atol=1e-14,
                                   err_msg=name)


@pytest.mark.torch
def test_conv_layer_matches_torch_conv1d_input_gradient():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x, w, b = (rng.standard_normal((3, 11, 4)), rng.standard_normal((6, 4, 4)),
               rng.standard_normal(6))
    out, cache = C.conv1d_forward(x, w, b, 3, 2)
    r = rng.standard_normal(out.shape)
    dx, dw, db = C.conv1d_backward(r, cache)
    tx = torch.from_numpy(x.transpose(0, 2, 1).copy()).requires_grad_()
    tw = torch.from_numpy(w.transpose(0, 2, 1).copy()).requires_grad_()
    tb = torch.from_numpy(b).requires_grad_()
    tout = torch.nn.functional.conv1d(tx, tw, tb, stride=3, padding=2)
    (tout * torch.from_numpy(r.transpose(0, 2, 1).copy())).sum().backward()
    np.testing.assert_allclose(out.transpose(0, 2, 1), tout.detach().numpy(), rtol=1e-12,
                               atol=1e-13)
    np.testing.assert_allclose(dx.transpose(0, 2, 1), tx.grad.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(dw.transpose(0, 2, 1), tw.grad.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(db, tb.grad.numpy(), rtol=1e-12, atol=1e-13)


def test_model_geometry_and_specs():
    cnn = CNN(length=40)
    assert cnn.lengths() == (40, 20, 10, 5) and cnn.paddings() == (2, 1, 1)
    shapes = cnn.shapes()
    assert shapes["conv1.w"] == (32, 5, 1) and shapes["conv2.w"] == (32, 3, 32)
    assert shapes["head.w"] == (10, 160)
    specs = cnn.specs()
    assert not specs["conv1.w"].sparse and not specs["conv2.b"].sparse
    assert specs["conv2.w"].nm == (2, 4) and specs["conv2.w"].axis == -1
    assert specs["head.w"].sparse
    assert not CNN(length=40, sparsify="all-but-last").specs()["head.w"].sparse
    assert not any(s.sparse for s in CNN(length=40, sparsify="none").specs().values())
    assert CNN(length=40, channels=16, kernel_sizes=3).kernel_sizes == (3,)


@pytest.mark.parametrize("kwargs, match", [
    ({"channels": ()}, "at least one"),
    ({"channels": (8, 6, 8), "nm": (1, 4)}, "not divisible by M = 4"),
    ({"kernel_sizes": (3, 3)}, "one value per conv layer"),
    ({"strides": 0}, "strides"),
    ({"kernel_sizes": (5, 3, 4), "strides": (8, 8, 1)}, "exceeds"),
    ({"sparsify": "some"}, "sparsify"),
    ({"kernel_sizes": "3"}, "kernel_sizes"),
])
def test_bad_model_options_name_the_argument(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        CNN(length=40, **kwargs)


def test_model_refuses_inputs_of_another_shape():
    cnn = CNN(length=40)
    params = cnn.init_params(0)
    with pytest.raises(ValueError, match=r"\(B, 40, 1\)"):
        cnn.forward(params, np.zeros((2, 40), np.float32))


@pytest.mark.torch
def test_the_torch_srste_peer_masks_input_channels_at_each_tap_as_stepsim():
    """The bench's torch SR-STE peer computes stepsim's masked forward: N:M over input
    channels at each tap of its (out, in, k) conv weights and the head's channels-first
    columns."""
    torch = pytest.importorskip("torch")
    from stepsim.bench._cnn_steps import srste_forward, torch_model
    from stepsim.core.masks import apply_nm

    cnn = CNN(length=20, channels=(8, 8, 4), classes=3, nm=(1, 4))
    params = _perturbed(cnn, 6)
    masked = {k: apply_nm(v, 1, 4) if cnn.specs()[k].sparse else v for k, v in params.items()}
    x = np.random.default_rng(6).standard_normal((5, 20, 1))
    forward = srste_forward(torch_model(cnn, params), cnn, cnn.specs())
    theirs = forward(torch.from_numpy(np.ascontiguousarray(x.transpose(0, 2, 1))))
    np.testing.assert_allclose(cnn.forward(masked, x)[0], theirs.detach().numpy(),
                               rtol=1e-12, atol=1e-13)
    assert not np.allclose(cnn.forward(params, x)[0], theirs.detach().numpy())
