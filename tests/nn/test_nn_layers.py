"""stepsim.nn.layers: every backward against central finite differences (float64), torch peer.

Each check contracts the layer's output with a fixed random tensor R, so the scalar
f(x) = sum(out * R) has gradient backward(R); central differences of f over every input
entry must agree with it. Shapes come from hypothesis.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepsim.nn import layers as L
from tests.gradcheck import numeric_grad

RTOL, ATOL = 1e-6, 1e-8

seeds = st.integers(0, 2**32 - 1)
leading = st.lists(st.integers(1, 4), min_size=0, max_size=2).map(tuple)
width = st.integers(1, 7)



def contract(forward, r):
    return lambda: float(np.sum(forward()[0] * r))


@settings(max_examples=25)
@given(seed=seeds, lead=leading, n_in=width, n_out=width, bias=st.booleans())
def test_linear_backward_matches_finite_differences(seed, lead, n_in, n_out, bias):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(lead + (n_in,))
    w = rng.standard_normal((n_out, n_in))
    b = rng.standard_normal(n_out) if bias else None
    out, cache = L.linear_forward(x, w, b)
    assert out.shape == lead + (n_out,) and out.dtype == np.float64
    r = rng.standard_normal(out.shape)
    dx, dw, db = L.linear_backward(r, cache)
    f = contract(lambda: L.linear_forward(x, w, b), r)
    np.testing.assert_allclose(dx, numeric_grad(f, x), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(dw, numeric_grad(f, w), rtol=RTOL, atol=ATOL)
    assert dw.flags.c_contiguous
    if bias:
        np.testing.assert_allclose(db, numeric_grad(f, b), rtol=RTOL, atol=ATOL)
    else:
        assert db is None


ACTIVATIONS = {
    "relu": (L.relu_forward, L.relu_backward),
    "tanh": (L.tanh_forward, L.tanh_backward),
    "gelu": (L.gelu_forward, L.gelu_backward),
}


@settings(max_examples=20)
@given(name=st.sampled_from(sorted(ACTIVATIONS)), seed=seeds, lead=leading, d=width)
def test_activation_backward_matches_finite_differences(name, seed, lead, d):
    forward, backward = ACTIVATIONS[name]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(lead + (d,)) * 2
    x += np.where(x >= 0, 1e-3, -1e-3)  # ReLU's kink stays beyond the 1e-6 step
    out, cache = forward(x)
    r = rng.standard_normal(out.shape)
    dx = backward(r, cache)
    np.testing.assert_allclose(dx, numeric_grad(contract(lambda: forward(x), r), x),
                               rtol=RTOL, atol=ATOL)


def test_activation_values():
    x = np.array([-2.0, -0.5, 0.0, 0.5, 3.0])
    np.testing.assert_array_equal(L.relu_forward(x)[0], [0, 0, 0, 0.5, 3.0])
    np.testing.assert_allclose(L.tanh_forward(x)[0], np.tanh(x))
    # exact GELU x * Phi(x): Phi(0.5) = 0.691462461274013, Phi(-2) = 0.022750131948179
    np.testing.assert_allclose(L.gelu_forward(x)[0][[0, 3]],
                               [-2 * 0.022750131948179, 0.5 * 0.691462461274013], rtol=1e-12)
    assert L.relu_backward(np.ones(5), L.relu_forward(x)[1])[2] == 0.0  # subgradient at 0


@settings(max_examples=20)
@given(seed=seeds, lead=leading, d=st.integers(2, 7))
def test_layernorm_backward_matches_finite_differences(seed, lead, d):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(lead + (d,))
    gamma, beta = rng.standard_normal(d), rng.standard_normal(d)
    out, cache = L.layernorm_forward(x, gamma, beta)
    r = rng.standard_normal(out.shape)
    dx, dgamma, dbeta = L.layernorm_backward(r, cache)
    f = contract(lambda: L.layernorm_forward(x, gamma, beta), r)
    np.testing.assert_allclose(dx, numeric_grad(f, x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dgamma, numeric_grad(f, gamma), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(dbeta, numeric_grad(f, beta), rtol=RTOL, atol=ATOL)


def test_layernorm_normalises_the_last_axis():
    x = np.random.default_rng(0).standard_normal((3, 5, 16)) * 4 + 7
    out, _ = L.layernorm_forward(x, np.ones(16), np.zeros(16), eps=0.0 + 1e-12)
    np.testing.assert_allclose(out.mean(axis=-1), 0, atol=1e-12)
    np.testing.assert_allclose(out.var(axis=-1), 1, rtol=1e-9)


@settings(max_examples=25)
@given(seed=seeds, lead=st.lists(st.integers(1, 4), min_size=1, max_size=2).map(tuple),
       c=st.integers(1, 6))
def test_softmax_cross_entropy_gradient_matches_finite_differences(seed, lead, c):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal(lead + (c,)) * 3
    labels = rng.integers(0, c, size=lead)
    loss, dlogits = L.softmax_cross_entropy(logits, labels)
    assert dlogits.shape == logits.shape
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    expected = -np.mean(np.log(np.take_along_axis(probs, labels[..., None], -1)))
    assert loss == pytest.approx(expected, rel=1e-12)
    numeric = numeric_grad(lambda: L.softmax_cross_entropy(logits, labels)[0], logits)
    np.testing.assert_allclose(dlogits, numeric, rtol=RTOL, atol=ATOL)


def test_softmax_cross_entropy_is_stable_for_huge_logits():
    logits = np.array([[1000.0, 0.0, -1000.0], [5e4, 5e4, 0.0]], dtype=np.float32)
    loss, grad = L.softmax_cross_entropy(logits, np.array([0, 1]))
    assert np.isfinite(loss) and np.all(np.isfinite(grad))
    assert loss == pytest.approx(np.log(2) / 2, rel=1e-6)
    assert grad.dtype == np.float32


@settings(max_examples=20)
@given(seed=seeds, lead=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))
def test_mse_gradient_matches_finite_differences(seed, lead):
    rng = np.random.default_rng(seed)
    pred, target = rng.standard_normal(lead), rng.standard_normal(lead)
    loss, dpred = L.mse_loss(pred, target)
    assert loss == pytest.approx(0.5 * np.sum((pred - target) ** 2) / lead[0], rel=1e-12)
    numeric = numeric_grad(lambda: L.mse_loss(pred, target)[0], pred)
    np.testing.assert_allclose(dpred, numeric, rtol=RTOL, atol=ATOL)


def test_float32_in_float32_out():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w = rng.standard_normal((3, 8)).astype(np.float32)
    b = np.zeros(3, np.float32)
    out, cache = L.linear_forward(x, w, b)
    assert out.dtype == np.float32
    assert all(g.dtype == np.float32 for g in L.linear_backward(out, cache))
    for forward, backward in ACTIVATIONS.values():
        y, c = forward(x)
        assert y.dtype == np.float32 and backward(y, c).dtype == np.float32
    g = np.ones(8, np.float32)
    y, c = L.layernorm_forward(x, g, g)
    assert y.dtype == np.float32
    assert all(a.dtype == np.float32 for a in L.layernorm_backward(y, c))
    assert L.mse_loss(x, x)[1].dtype == np.float32


def test_bad_input_is_a_clear_error():
    x = np.zeros((2, 4))
    with pytest.raises(ValueError, match="last axis must equal"):
        L.linear_forward(x, np.zeros((3, 5)), None)
    with pytest.raises(TypeError, match="w has dtype float32"):
        L.linear_forward(x, np.zeros((3, 4), np.float32), None)
    with pytest.raises(ValueError, match=r"b must have shape \(3,\)"):
        L.linear_forward(x, np.zeros((3, 4)), np.zeros(4))
    with pytest.raises(TypeError, match="float32 or float64"):
        L.relu_forward(np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="labels must lie in"):
        L.softmax_cross_entropy(x, np.array([0, 4]))
    with pytest.raises(ValueError, match="labels must have shape"):
        L.softmax_cross_entropy(x, np.array([0, 1, 2]))
    with pytest.raises(TypeError, match="integer"):
        L.softmax_cross_entropy(x, np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="eps must be"):
        L.layernorm_forward(x, np.ones(4), np.zeros(4), eps=0)
    with pytest.raises(ValueError, match="target must have shape"):
        L.mse_loss(x, np.zeros((2, 3)))


@pytest.mark.torch
def test_layers_match_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 5, 8))
    w, b = rng.standard_normal((6, 8)), rng.standard_normal(6)
    gamma, beta = rng.standard_normal(6), rng.standard_normal(6)
    labels = rng.integers(0, 6, size=(3, 5))

    # engine: linear -> layernorm -> gelu -> cross-entropy
    h, c1 = L.linear_forward(x, w, b)
    n, c2 = L.layernorm_forward(h, gamma, beta)
    a, c3 = L.gelu_forward(n)
    loss, da = L.softmax_cross_entropy(a, labels)
    dn = L.gelu_backward(da, c3)
    dh, dgamma, dbeta = L.layernorm_backward(dn, c2)
    dx, dw, db = L.linear_backward(dh, c1)

    tx, tw, tb, tg, tbe = (torch.tensor(v, requires_grad=True) for v in (x, w, b, gamma, beta))
    ta = F.gelu(F.layer_norm(F.linear(tx, tw, tb), (6,), tg, tbe, eps=1e-5))
    tloss = F.cross_entropy(ta.reshape(-1, 6), torch.tensor(labels).reshape(-1))
    tloss.backward()
    assert loss == pytest.approx(tloss.item(), rel=1e-12)
    for ours, theirs in [(dx, tx), (dw, tw), (db, tb), (dgamma, tg), (dbeta, tbe)]:
        np.testing.assert_allclose(ours, theirs.grad.numpy(), rtol=1e-10, atol=1e-12)

    p, t = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    tp = torch.tensor(p, requires_grad=True)
    tl = 0.5 * ((tp - torch.tensor(t)) ** 2).sum() / 4
    tl.backward()
    mloss, dp = L.mse_loss(p, t)
    assert mloss == pytest.approx(tl.item(), rel=1e-12)
    np.testing.assert_allclose(dp, tp.grad.numpy(), rtol=1e-12)

    tt = torch.tensor(x, requires_grad=True)
    torch.tanh(torch.relu(tt)).backward(torch.tensor(x))
    r, cr = L.relu_forward(x)
    _, ct = L.tanh_forward(r)
    np.testing.assert_allclose(L.relu_backward(L.tanh_backward(x, ct), cr), tt.grad.numpy(),
                               rtol=1e-12, atol=1e-15)
