"""stepsim.nn.attention: the causal softmax kernels against their NumPy references, and every
backward against central finite differences (float64) and torch's autograd."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepsim.nn import attention as A
from tests.gradcheck import numeric_grad

seeds = st.integers(0, 2**32 - 1)



# --------------------------------------------------------------------------- softmax kernels
@settings(max_examples=40)
@given(seed=seeds, lead=st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple),
       t=st.integers(1, 19), dtype=st.sampled_from([np.float32, np.float64]),
       scale=st.floats(0.01, 4.0), spread=st.sampled_from([1.0, 30.0, 1e4]))
def test_causal_softmax_kernel_matches_reference(seed, lead, t, dtype, scale, spread):
    rng = np.random.default_rng(seed)
    s = (spread * rng.standard_normal(lead + (t, t))).astype(dtype)
    ref = A.causal_softmax_reference(s, scale)
    got = A.causal_softmax(s.copy(), scale)
    assert got.dtype == dtype and np.all(np.isfinite(got))  # large scores do not overflow
    tol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(got, ref, rtol=tol * 10, atol=tol)
    np.testing.assert_allclose(got.sum(axis=-1), 1.0, atol=tol * 10)
    assert np.all(got[..., ~np.tri(t, dtype=bool)] == 0)  # nothing looks ahead
    dp = rng.standard_normal(s.shape).astype(dtype)
    back_ref = A.softmax_backward_reference(ref, dp)
    back = A.softmax_backward(got, dp.copy())
    np.testing.assert_allclose(back, back_ref, rtol=tol * 10, atol=tol * 10)


@settings(max_examples=40, deadline=None)
@given(seed=seeds, n=st.integers(1, 70), t=st.integers(1, 40),
       dtype=st.sampled_from([np.float32, np.float64]), scale=st.floats(0.01, 4.0),
       spread=st.sampled_from([1.0, 30.0, 1e4]), specials=st.integers(0, 4))
def test_the_softmax_taken_across_matrices_gives_the_row_by_row_bits(seed, n, t, dtype, scale,
                                                                     spread, specials):
    """causal_softmax runs row i of every matrix at once (vectorised across the matrices);
    causal_softmax_rows runs softmax_row on one row after another. Same bits, NaN, inf and
    rows of every length (tails of the eight lanes) included."""
    from stepsim.nn import _kernels as K

    rng = np.random.default_rng(seed)
    s = (spread * rng.standard_normal((n, t, t))).astype(dtype)
    s.flat[rng.integers(0, s.size, specials)] = rng.choice(
        np.array([np.nan, np.inf, -np.inf, -0.0], dtype), specials)
    got, want = s.copy(), s.copy()
    K.causal_softmax(got, dtype(scale), dtype == np.float32)
    K.causal_softmax_rows(want, dtype(scale), dtype == np.float32)
    assert got.tobytes() == want.tobytes()


def test_softmax_wrappers_reject_bad_input():
    with pytest.raises(ValueError, match=r"\(\.\.\., T, T\)"):
        A.causal_softmax(np.zeros((2, 3), np.float32), 1.0)
    with pytest.raises(TypeError, match="float32 or float64"):
        A.causal_softmax(np.zeros((3, 3), np.int64), 1.0)
    with pytest.raises(ValueError, match="C-contiguous"):
        A.causal_softmax(np.zeros((2, 3, 3), np.float32)[:, ::-1], 1.0)
    with pytest.raises(ValueError, match="must match"):
        A.softmax_backward(np.zeros((3, 3)), np.zeros((3, 3), np.float32))


# --------------------------------------------------------------------------- gradients
@settings(max_examples=8)
@given(seed=seeds, kernel=st.booleans())
def test_attention_core_backward_matches_finite_differences(seed, kernel):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((2, 2, 4, 3)) for _ in range(3))
    out, cache = A.causal_attention_forward(q, k, v, kernel=kernel)
    r = rng.standard_normal(out.shape)
    dq, dk, dv = A.causal_attention_backward(r, cache, kernel=kernel)
    f = lambda: float(np.sum(A.causal_attention_forward(q, k, v, kernel=kernel)[0] * r))
    for x, dx in ((q, dq), (k, dk), (v, dv)):
        np.testing.assert_allclose(dx, numeric_grad(f, x), rtol=1e-6, atol=1e-8)


def attention_params(rng, d, bias):
    p = {w: rng.standard_normal((d, d)) / np.sqrt(d) for w in A.ATTENTION_WEIGHTS}
    if bias:
        p.update({b: 0.1 * rng.standard_normal(d) for b in A.ATTENTION_BIASES})
    return p


@pytest.mark.parametrize("bias", [True, False])
def test_self_attention_backward_matches_finite_differences(bias):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 6))
    p = attention_params(rng, 6, bias)
    out, cache = A.self_attention_forward(x, p, n_heads=3)
    r = rng.standard_normal(out.shape)
    dx, grads = A.self_attention_backward(r, cache)
    assert sorted(grads) == sorted(p)
    f = lambda: float(np.sum(A.self_attention_forward(x, p, n_heads=3)[0] * r))
    np.testing.assert_allclose(dx, numeric_grad(f, x), rtol=1e-6, atol=1e-8)
    for name in p:
        assert grads[name].shape == p[name].shape and grads[name].flags.c_contiguous
        np.testing.assert_allclose(grads[name], numeric_grad(f, p[name]), rtol=1e-6, atol=1e-8)


def test_self_attention_is_causal():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 6, 4))
    p = attention_params(rng, 4, True)
    out, _ = A.self_attention_forward(x, p, n_heads=2)
    x2 = x.copy()
    x2[0, 4:] += 5.0  # change the future of position 3
    out2, _ = A.self_attention_forward(x2, p, n_heads=2)
    np.testing.assert_array_equal(out[0, :4], out2[0, :4])
    assert not np.allclose(out[0, 4:], out2[0, 4:])


def test_heads_must_divide_width():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="n_heads"):
        A.self_attention_forward(rng.standard_normal((1, 2, 6)), attention_params(rng, 6, False),
                                 n_heads=4)


@pytest.mark.torch
def test_self_attention_matches_torch_autograd():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(2)
    b, t, d, heads = 3, 7, 8, 2
    x = rng.standard_normal((b, t, d))
    p = attention_params(rng, d, True)
    out, cache = A.self_attention_forward(x, p, heads)
    r = rng.standard_normal(out.shape)
    dx, grads = A.self_attention_backward(r, cache)

    tp = {k: torch.tensor(v, requires_grad=True) for k, v in p.items()}
    tx = torch.tensor(x, requires_grad=True)
    split = lambda z: z.view(b, t, heads, d // heads).transpose(1, 2)
    q = split(tx @ tp["wq"].T + tp["bq"])
    k = split(tx @ tp["wk"].T + tp["bk"])
    v = split(tx @ tp["wv"].T + tp["bv"])
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
    tout = o @ tp["wo"].T + tp["bo"]
    (tout * torch.tensor(r)).sum().backward()
    np.testing.assert_allclose(out, tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-9, atol=1e-11)
    for name in p:
        np.testing.assert_allclose(grads[name], tp[name].grad.numpy(), rtol=1e-9, atol=1e-11)
