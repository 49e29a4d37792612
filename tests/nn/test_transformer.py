"""stepsim.nn.transformer, stepsim.nn.embedding and the fused LayerNorm/GELU kernels:
gradients against central finite differences (float64) and torch autograd, kernels
against the NumPy layers of stepsim.nn.layers (their references)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepsim.nn import fused
from stepsim.nn import layers as L
from stepsim.nn import transformer as tr
from stepsim.nn.embedding import embedding_backward, embedding_forward
from tests.gradcheck import numeric_grad

seeds = st.integers(0, 2**32 - 1)
TINY = {"vocab": 5, "context": 4, "width": 4, "blocks": 2, "heads": 2, "mlp_ratio": 2}



def perturbed_params(cfg, seed, dtype=np.float64):
    """Initial parameters moved off their init (LayerNorm gains != 1, biases != 0)."""
    rng = np.random.default_rng(seed)
    params = tr.init_params(cfg, rng, dtype)
    return {k: (v + 0.3 * rng.standard_normal(v.shape)).astype(dtype) for k, v in params.items()}


def batch(cfg, seed, size=3):
    rng = np.random.default_rng(seed + 1)
    return (rng.integers(0, cfg.vocab, (size, cfg.context)),
            rng.integers(0, cfg.vocab, (size, cfg.context)))


# --------------------------------------------------------------------------- whole model
@pytest.mark.parametrize("tied, bias, kernels", [(False, True, True), (True, True, False),
                                                 (False, False, False), (True, False, True)])
def test_model_gradient_matches_finite_differences(tied, bias, kernels):
    cfg = tr.TransformerConfig(**TINY, tied=tied, bias=bias)
    params = perturbed_params(cfg, 0)
    ids, targets = batch(cfg, 0)
    _loss, grads = tr.loss_and_grad(params, ids, targets, cfg, kernels=kernels)
    assert list(grads) == list(tr.param_shapes(cfg))
    f = lambda: tr.loss_and_grad(params, ids, targets, cfg, kernels=kernels)[0]
    for name, value in params.items():
        assert grads[name].shape == value.shape and grads[name].dtype == np.float64
        np.testing.assert_allclose(grads[name], numeric_grad(f, value), rtol=1e-5, atol=1e-8,
                                   err_msg=name)


def test_kernels_agree_with_numpy_layers_in_float32():
    cfg = tr.TransformerConfig(vocab=11, context=9, width=16, blocks=2, heads=4)
    params = perturbed_params(cfg, 3, np.float32)
    ids, targets = batch(cfg, 3, size=4)
    loss_k, grads_k = tr.loss_and_grad(params, ids, targets, cfg, kernels=True)
    loss_n, grads_n = tr.loss_and_grad(params, ids, targets, cfg, kernels=False)
    assert loss_k == pytest.approx(loss_n, rel=1e-5)
    for name in grads_n:
        assert grads_k[name].dtype == np.float32
        # bk's exact gradient is 0 (a key bias shifts a whole softmax row): rounding only
        scale = np.abs(grads_n[name]).max()
        np.testing.assert_allclose(grads_k[name], grads_n[name], atol=2e-4 * scale + 1e-7,
                                   err_msg=name)


def test_forward_does_not_modify_params_and_is_causal():
    cfg = tr.TransformerConfig(**TINY)
    params = perturbed_params(cfg, 1)
    before = {k: v.copy() for k, v in params.items()}
    ids, targets = batch(cfg, 1)
    logits, _ = tr.forward(params, ids, cfg)
    tr.loss_and_grad(params, ids, targets, cfg)
    assert all(np.array_equal(before[k], params[k]) for k in params)
    ids2 = ids.copy()
    ids2[:, -1] = (ids2[:, -1] + 1) % cfg.vocab
    logits2, _ = tr.forward(params, ids2, cfg)
    np.testing.assert_array_equal(logits[:, :-1], logits2[:, :-1])


def test_linear_names_cover_every_linear_weight():
    cfg = tr.TransformerConfig(**TINY)
    names = tr.linear_names(cfg)
    assert list(names) == list(tr.LINEAR_KINDS)
    flat = [n for kind in names.values() for n in kind]
    shapes = tr.param_shapes(cfg)
    assert len(flat) == 6 * cfg.blocks + 1 and all(len(shapes[n]) == 2 for n in flat)
    assert tr.linear_names(tr.TransformerConfig(**TINY, tied=True))["head"] == []


@pytest.mark.parametrize("kwargs, word", [({"width": 6, "heads": 4}, "heads"),
                                          ({"blocks": 0}, "blocks"), ({"eps": 0.0}, "eps")])
def test_bad_config_names_the_argument(kwargs, word):
    with pytest.raises(ValueError, match=word):
        tr.TransformerConfig(**kwargs)


@pytest.mark.torch
@pytest.mark.parametrize("tied", [False, True])
def test_model_matches_torch_autograd(tied):
    torch = pytest.importorskip("torch")
    from stepsim.bench._lm_steps import params_as_torch, torch_model, torch_parameters

    cfg = tr.TransformerConfig(vocab=7, context=6, width=8, blocks=2, heads=2, tied=tied)
    params = perturbed_params(cfg, 4)
    ids, targets = batch(cfg, 4)
    logits, _ = tr.forward(params, ids, cfg)
    loss, grads = tr.loss_and_grad(params, ids, targets, cfg)
    model = torch_model(cfg, params)
    tlogits = model(torch.from_numpy(ids))
    tloss = torch.nn.functional.cross_entropy(tlogits.reshape(-1, cfg.vocab),
                                              torch.from_numpy(targets).reshape(-1))
    tloss.backward()
    np.testing.assert_allclose(logits, tlogits.detach().numpy(), rtol=1e-9, atol=1e-11)
    assert loss == pytest.approx(tloss.item(), rel=1e-12)
    ours = params_as_torch(grads, cfg)
    for name, tensor in torch_parameters(model, cfg).items():
        np.testing.assert_allclose(ours[name], tensor.grad.numpy(), rtol=1e-8, atol=1e-11,
                                   err_msg=name)


# --------------------------------------------------------------------------- embedding
def test_embedding_backward_sums_repeated_tokens():
    rng = np.random.default_rng(0)
    table, pos = rng.standard_normal((4, 3)), rng.standard_normal((6, 3))
    ids = np.array([[1, 1, 3], [1, 0, 3]])
    out, cache = embedding_forward(ids, table, pos)
    np.testing.assert_array_equal(out[1, 2], table[3] + pos[2])
    r = rng.standard_normal(out.shape)
    dtable, dpos = embedding_backward(r, cache)
    f = lambda: float(np.sum(embedding_forward(ids, table, pos)[0] * r))
    np.testing.assert_allclose(dtable, numeric_grad(f, table), atol=1e-8)
    np.testing.assert_allclose(dpos, numeric_grad(f, pos), atol=1e-8)
    assert np.all(dtable[2] == 0) and np.all(dpos[3:] == 0)  # unused token and positions


def test_embedding_rejects_bad_ids():
    table, pos = np.zeros((4, 2)), np.zeros((3, 2))
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        embedding_forward(np.array([[0, 4]]), table, pos)
    with pytest.raises(ValueError, match="exceeds"):
        embedding_forward(np.zeros((1, 5), int), table, pos)
    with pytest.raises(ValueError, match="integer"):
        embedding_forward(np.zeros((1, 2)), table, pos)


# --------------------------------------------------------------------------- fused kernels
@settings(max_examples=30)
@given(seed=seeds, rows=st.integers(1, 40), d=st.integers(1, 70),
       dtype=st.sampled_from([np.float32, np.float64]), shift=st.sampled_from([0.0, 50.0]))
def test_fused_layernorm_matches_reference(seed, rows, d, dtype, shift):
    rng = np.random.default_rng(seed)
    x = (shift + rng.standard_normal((rows, d))).astype(dtype)
    g, b = (rng.standard_normal(d).astype(dtype) for _ in range(2))
    out, cache = fused.layernorm_forward(x, g, b)
    ref, ref_cache = L.layernorm_forward(x, g, b)
    tol = 2e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
    dout = rng.standard_normal(x.shape).astype(dtype)
    for got, want in zip(fused.layernorm_backward(dout, cache),
                         L.layernorm_backward(dout, ref_cache)):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1, rows))


@settings(max_examples=30)
@given(seed=seeds, shape=st.lists(st.integers(1, 30), min_size=1, max_size=3).map(tuple),
       dtype=st.sampled_from([np.float32, np.float64]), spread=st.sampled_from([1.0, 4.0, 20.0]))
def test_fused_gelu_matches_reference(seed, shape, dtype, spread):
    rng = np.random.default_rng(seed)
    x = (spread * rng.standard_normal(shape)).astype(dtype)
    out, cache = fused.gelu_forward(x)
    exact, exact_cache = L.gelu_forward(x.astype(np.float64))
    dout = rng.standard_normal(shape).astype(dtype)
    dx = fused.gelu_backward(dout, cache)
    dexact = L.gelu_backward(dout.astype(np.float64), exact_cache)
    assert out.dtype == dx.dtype == dtype
    if dtype == np.float64:  # float64 is the exact reference itself
        np.testing.assert_array_equal(out, exact)
        np.testing.assert_array_equal(dx, dexact)
    else:  # |error of Phi| <= 1.5e-7 (A&S 7.1.26) plus float32 rounding
        np.testing.assert_allclose(out, exact, rtol=1e-6, atol=3e-7 * np.abs(x).max())
        np.testing.assert_allclose(dx, dexact, rtol=1e-6, atol=5e-7 * np.abs(dout).max()
                                   * max(1.0, np.abs(x).max()))


def test_float32_normal_cdf_error_is_within_its_bound():
    from scipy.special import ndtr

    x = np.linspace(-12, 12, 200_001).astype(np.float32)
    out, _ = fused.gelu_forward(x)
    phi = np.divide(out, x, out=np.full_like(out, 0.5), where=x != 0)
    err = np.abs(phi.astype(np.float64) - ndtr(x.astype(np.float64)))
    # A&S 7.1.26 (|erf error| <= 1.5e-7, so Phi's <= 7.5e-8) plus the float32 rounding of
    # 1 - tail, of x * Phi and of the division back (each up to 6e-8 near Phi = 1)
    assert err[np.abs(x) > 1e-3].max() < 3e-7


@settings(max_examples=30)
@given(seed=seeds, n=st.integers(0, 60), vocab=st.integers(1, 9), d=st.integers(1, 17),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_scatter_add_kernel_matches_numpy_add_at(seed, n, vocab, d, dtype):
    from stepsim.nn import _kernels as K

    rng = np.random.default_rng(seed)
    index = rng.integers(0, vocab, n)
    rows = rng.standard_normal((n, d)).astype(dtype)
    ref = np.zeros((vocab, d), dtype)
    np.add.at(ref, index, rows)
    out = np.zeros((vocab, d), dtype)
    K.scatter_add_rows(index, rows, out)
    np.testing.assert_array_equal(out, ref)  # both add in order of occurrence


def test_the_model_runs_compiled_kernels():
    from stepsim.nn import _kernels as K

    cfg = tr.TransformerConfig(**TINY)
    params = perturbed_params(cfg, 0, np.float32)
    tr.loss_and_grad(params, *batch(cfg, 0), cfg, kernels=True)
    for kernel in (K.causal_softmax, K.causal_softmax_backward, K.layernorm_forward,
                   K.residual_layernorm, K.layernorm_backward_residual, K.bias_gelu,
                   K.slope_backward_bias, K.add_bias, K.rows_sum, K.scatter_add_rows):
        assert kernel.signatures, kernel


@settings(max_examples=30)
@given(seed=seeds, n=st.integers(1, 300), spread=st.sampled_from([0.1, 3.0, 30.0, 100.0]))
def test_float32_exp_kernel_is_within_two_ulps(seed, n, spread):
    from stepsim.nn import _kernels as K

    x = -spread * np.random.default_rng(seed).random(n).astype(np.float32)
    x[0] = 0.0
    out = np.array([K.exp_nonpositive_f32(v) for v in x], dtype=np.float32)  # the kernel
    exact = np.exp(x.astype(np.float64))
    normal = x >= -87
    assert out[0] == 1.0
    assert np.all(np.abs(out[normal] - exact[normal]) <= 1.2e-7 * exact[normal])
    assert np.all(out[~normal] == 0)  # below float32's normal range: flushed to 0
