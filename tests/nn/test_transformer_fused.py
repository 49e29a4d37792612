"""The transformer's fused path (``kernels=True``, stepsim.nn._transformer_fused) gives the
bits of composing its layers one call at a time, and each fused kernel gives the bits of
the NumPy calls it replaces.

:func:`composed_loss_and_grad` below is the reference: the model written layer by layer
with the public layers (``layers.linear_*``, the LayerNorm/GELU kernels of
``stepsim.nn.fused``, ``attention.self_attention_*``), one call per layer, copies into
head-major layouts included. It is what ``kernels=True`` ran before the fused path.
"""

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepsim.nn import attention as A
from stepsim.nn import fused
from stepsim.nn import layers as L
from stepsim.nn import transformer as tr
from stepsim.nn.embedding import embedding_backward, embedding_forward

seeds = st.integers(0, 2**32 - 1)


def composed_loss_and_grad(params, ids, targets, cfg):
    """(loss, grads) of the model, layer by layer (module docstring)."""
    h, emb = embedding_forward(ids, params["tok_emb"], params["pos_emb"])
    b, t, d = h.shape
    h = h.reshape(b * t, d)
    caches = []
    for i in range(cfg.blocks):
        p = f"blocks.{i}."
        a, ln1 = fused.layernorm_forward(h, params[p + "ln1.g"], params[p + "ln1.b"], cfg.eps)
        keys = ("wq", "wk", "wv", "wo") + (("bq", "bk", "bv", "bo") if cfg.bias else ())
        att, attn = A.self_attention_forward(a.reshape(b, t, d),
                                             {k: params[p + "attn." + k] for k in keys},
                                             cfg.heads, kernel=True)
        h = h + att.reshape(b * t, d)
        m, ln2 = fused.layernorm_forward(h, params[p + "ln2.g"], params[p + "ln2.b"], cfg.eps)
        u, fc1 = L.linear_forward(m, params[p + "mlp.w1"], params.get(p + "mlp.b1"))
        g, act = fused.gelu_forward(u)
        f, fc2 = L.linear_forward(g, params[p + "mlp.w2"], params.get(p + "mlp.b2"))
        h = h + f
        caches.append((ln1, attn, ln2, fc1, act, fc2))
    z, lnf = fused.layernorm_forward(h, params["lnf.g"], params["lnf.b"], cfg.eps)
    head_w = params["tok_emb"] if cfg.tied else params["head.w"]
    logits, head = L.linear_forward(z, head_w, None)
    loss, dlogits = fused.softmax_cross_entropy(logits.reshape(b, t, cfg.vocab), targets)
    grads = {}
    dz, dhead, _ = L.linear_backward(dlogits.reshape(b * t, cfg.vocab), head)
    dh, grads["lnf.g"], grads["lnf.b"] = fused.layernorm_backward(dz, lnf)
    for i in reversed(range(cfg.blocks)):
        p = f"blocks.{i}."
        ln1, attn, ln2, fc1, act, fc2 = caches[i]
        dg, grads[p + "mlp.w2"], db2 = L.linear_backward(dh, fc2)
        du = fused.gelu_backward(dg, act)
        dm, grads[p + "mlp.w1"], db1 = L.linear_backward(du, fc1)
        if cfg.bias:
            grads[p + "mlp.b1"], grads[p + "mlp.b2"] = db1, db2
        dres, grads[p + "ln2.g"], grads[p + "ln2.b"] = fused.layernorm_backward(dm, ln2)
        dh = dh + dres
        da, attn_grads = A.self_attention_backward(dh.reshape(b, t, d), attn, kernel=True)
        for k, g in attn_grads.items():
            grads[p + "attn." + k] = g
        dres, grads[p + "ln1.g"], grads[p + "ln1.b"] = fused.layernorm_backward(
            da.reshape(b * t, d), ln1)
        dh = dh + dres
    dtable, grads["pos_emb"] = embedding_backward(dh.reshape(b, t, d), emb)
    if cfg.tied:
        dtable += dhead
    else:
        grads["head.w"] = dhead
    grads["tok_emb"] = dtable
    return loss, logits.reshape(b, t, cfg.vocab), grads


def _case(vocab, context, width, heads, blocks, mlp_ratio, bias, tied, dtype, seed, batch):
    cfg = tr.TransformerConfig(vocab=vocab, context=context, width=width, blocks=blocks,
                               heads=heads, mlp_ratio=mlp_ratio, bias=bias, tied=tied)
    rng = np.random.default_rng(seed)
    params = tr.init_params(cfg, rng, dtype)
    # off the initialisation: LayerNorm gains != 1, biases != 0, so every term counts
    params = {k: (v + 0.3 * rng.standard_normal(v.shape)).astype(dtype)
              for k, v in params.items()}
    t = int(rng.integers(1, context + 1))
    ids = rng.integers(0, vocab, (batch, t))
    targets = rng.integers(0, vocab, (batch, t))
    return cfg, params, ids, targets


@settings(max_examples=25, deadline=None)
@given(vocab=st.integers(2, 20), context=st.integers(1, 12), hd=st.sampled_from([1, 2, 4, 8]),
       heads=st.integers(1, 3), blocks=st.integers(1, 3), mlp_ratio=st.integers(1, 3),
       bias=st.booleans(), tied=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=seeds,
       batch=st.integers(1, 4))
def test_the_fused_path_gives_the_bits_of_the_layers_composed(vocab, context, hd, heads,
                                                               blocks, mlp_ratio, bias,
                                                               tied, dtype, seed, batch):
    cfg, params, ids, targets = _case(vocab, context, hd * heads, heads, blocks, mlp_ratio,
                                      bias, tied, dtype, seed, batch)
    want_loss, want_logits, want = composed_loss_and_grad(params, ids, targets, cfg)
    logits, _ = tr.forward(params, ids, cfg, kernels=True)
    loss, grads = tr.loss_and_grad(params, ids, targets, cfg, kernels=True)
    assert logits.tobytes() == want_logits.tobytes()
    assert loss == want_loss
    assert list(grads) == list(tr.param_shapes(cfg))
    for name, g in grads.items():
        assert g.dtype == want[name].dtype and g.flags.c_contiguous, name
        assert g.tobytes() == np.ascontiguousarray(want[name]).tobytes(), name


# sha256 of (logits, loss, every gradient) on fixed inputs, recorded from the layer-by-layer
# path before the fused one replaced it (the same digests the composition above gives)
RECORDED = {
    "bias f32": "1670e3b3d4c636d1d4c402f9b0b091240481761d6dae769a436313134df6d929",
    "nobias tied f32": "ea7e29d330915a79cfd932b120a4963433a601c0ac728983859dfbf1766e991b",
    "lm.md f32": "e6568a2a6dd3e715d9bda9acc0bebbc707d059723731538559c3603fc49be8d4",
    "wide f32": "ad1b4eaeec7fb1fb137633f5667f041b4448634eb15f8171b095582a3e671ad7",
    "bias f64": "515661cd150b4c1486878ef832d4fd5e8ffda59514153af7037975fbd1a4878c",
}
CASES = {
    "bias f32": (dict(vocab=11, context=8, width=16, blocks=2, heads=2), np.float32, (3, 8)),
    "nobias tied f32": (dict(vocab=11, context=8, width=16, blocks=2, heads=2, bias=False,
                             tied=True), np.float32, (3, 8)),
    "lm.md f32": (dict(vocab=16, context=32, width=32, blocks=2, heads=2), np.float32,
                  (4, 32)),
    "wide f32": (dict(vocab=64, context=16, width=64, blocks=1, heads=4, mlp_ratio=2),
                 np.float32, (2, 12)),
    "bias f64": (dict(vocab=11, context=8, width=16, blocks=2, heads=2), np.float64, (3, 8)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_recorded_digests_are_unchanged(name):
    kw, dtype, shape = CASES[name]
    cfg = tr.TransformerConfig(**kw)
    params = tr.init_params(cfg, 7, dtype=dtype)
    rng = np.random.default_rng(3)
    ids = rng.integers(0, cfg.vocab, shape)
    targets = rng.integers(0, cfg.vocab, shape)
    logits, _ = tr.forward(params, ids, cfg, kernels=True)
    loss, grads = tr.loss_and_grad(params, ids, targets, cfg, kernels=True)
    h = hashlib.sha256(logits.tobytes())
    h.update(np.float64(loss).tobytes())
    for k in sorted(grads):
        h.update(k.encode())
        h.update(grads[k].dtype.str.encode())
        h.update(grads[k].tobytes())
    assert h.hexdigest() == RECORDED[name]


# --------------------------------------------------------------------------- the kernels
def _rows(dtype, seed, rows, d):
    rng = np.random.default_rng(seed)
    return rng, (lambda *shape: rng.standard_normal(shape).astype(dtype))


@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from([np.float32, np.float64]), seed=seeds, rows=st.integers(1, 40),
       d=st.integers(1, 70), bias=st.booleans())
def test_residual_layernorm_gives_the_bits_of_add_then_layernorm(dtype, seed, rows, d, bias):
    from stepsim.nn import _kernels as K

    _, r = _rows(dtype, seed, rows, d)
    h, f, gamma, beta, b = r(rows, d), r(rows, d), r(d), r(d), r(d)
    h[0, 0] = -0.0  # signed zeros: the add's order decides them
    f[0, 0] = 0.0
    want_h = h + (f + b if bias else f)
    want, cache = fused.layernorm_forward(want_h, gamma, beta, 1e-5)
    got_h = h.copy()
    out, xhat, rstd = np.empty_like(h), np.empty_like(h), np.empty(rows, dtype)
    K.residual_layernorm(got_h, f, b, bias, gamma, beta, dtype(1e-5), out, xhat, rstd)
    assert got_h.tobytes() == want_h.tobytes()
    assert out.tobytes() == want.tobytes() and xhat.tobytes() == cache.xhat.tobytes()
    assert rstd.tobytes() == cache.rstd[:, 0].tobytes()


@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from([np.float32, np.float64]), seed=seeds, rows=st.integers(1, 40),
       d=st.integers(1, 70), resid=st.booleans(), want_sum=st.booleans())
def test_layernorm_backward_residual_gives_the_bits_of_its_three_steps(dtype, seed, rows, d,
                                                                       resid, want_sum):
    from stepsim.nn import _kernels as K

    _, r = _rows(dtype, seed, rows, d)
    x, gamma, beta, dout, res = r(rows, d), r(d), r(d), r(rows, d), r(rows, d)
    _, cache = fused.layernorm_forward(x, gamma, beta, 1e-5)
    dx_ref, dg_ref, db_ref = fused.layernorm_backward(dout, cache)
    if resid:
        dx_ref = res + dx_ref
    dx, dg, db, dsum = (np.empty_like(x), np.empty(d, dtype), np.empty(d, dtype),
                        np.full(d, 7, dtype))
    K.layernorm_backward_residual(dout, cache.xhat, cache.rstd[:, 0], gamma, res, resid, dx,
                                  dg, db, dsum, want_sum)
    assert dx.tobytes() == dx_ref.tobytes()
    assert dg.tobytes() == dg_ref.tobytes() and db.tobytes() == db_ref.tobytes()
    if want_sum:
        assert dsum.tobytes() == dx_ref.sum(axis=0).tobytes()
    else:
        assert np.all(dsum == 7)


@settings(max_examples=40, deadline=None)
@given(seed=seeds, rows=st.integers(1, 40), d=st.integers(1, 70), bias=st.booleans(),
       spread=st.sampled_from([0.1, 1.0, 5.0, 30.0]))
def test_bias_gelu_and_its_slope_give_the_bits_of_the_gelu_kernels(seed, rows, d, bias,
                                                                   spread):
    from stepsim.nn import _kernels as K

    rng, r = _rows(np.float32, seed, rows, d)
    u = (spread * r(rows, d)).astype(np.float32)
    b, dout = r(d), r(rows, d)
    u[0, 0] = -0.0
    want_u = u + b if bias else u.copy()
    want, act = fused.gelu_forward(want_u)
    want_dx = fused.gelu_backward(dout, act)
    got_u = u.copy()
    out, slope = np.empty_like(u), np.empty_like(u)
    K.bias_gelu(got_u, b, bias, out, slope)
    assert got_u.tobytes() == want_u.tobytes() and out.tobytes() == want.tobytes()
    dx, db = np.empty_like(u), np.empty(d, np.float32)
    K.slope_backward_bias(dout, slope, dx, db, True)
    assert dx.tobytes() == want_dx.tobytes()
    assert db.tobytes() == want_dx.sum(axis=0).tobytes()


@settings(max_examples=30, deadline=None)
@given(dtype=st.sampled_from([np.float32, np.float64]), seed=seeds, rows=st.integers(1, 30),
       d=st.integers(1, 70))
def test_add_bias_and_rows_sum_give_numpys_bits(dtype, seed, rows, d):
    from stepsim.nn import _kernels as K

    _, r = _rows(dtype, seed, rows, d)
    h, b = r(rows, d), r(d)
    h[0, 0] = -0.0
    b[0] = 0.0
    want = h.copy()
    want += b
    K.add_bias(h, b)
    assert h.tobytes() == want.tobytes()
    s = np.empty(d, dtype)
    K.rows_sum(h, s)
    assert s.tobytes() == h.sum(axis=0).tobytes()


@settings(max_examples=30, deadline=None)
@given(dtype=st.sampled_from([np.float32, np.float64]), seed=seeds, n=st.integers(1, 5),
       t=st.integers(1, 20), scale=st.sampled_from([1.0, 0.25, 1 / np.sqrt(3)]))
def test_softmax_backward_with_a_scale_gives_the_reference_then_the_scale(dtype, seed, n, t,
                                                                          scale):
    _, r = _rows(dtype, seed, n, t)
    probs = A.causal_softmax(r(n, t, t), 0.5)
    dprobs = r(n, t, t)
    want = A.softmax_backward(probs, dprobs.copy())
    want *= want.dtype.type(scale)
    got = A.softmax_backward(probs, dprobs.copy(), scale)
    assert got.tobytes() == want.tobytes()


def test_bad_parameters_are_named_before_any_kernel_runs():
    cfg = tr.TransformerConfig(vocab=5, context=4, width=4, blocks=1, heads=2)
    params = tr.init_params(cfg, 0)
    ids = np.zeros((2, 4), dtype=np.int64)
    with pytest.raises(KeyError, match="blocks.0.mlp.w1"):
        tr.forward({k: v for k, v in params.items() if k != "blocks.0.mlp.w1"}, ids, cfg)
    with pytest.raises(TypeError, match="blocks.0.ln2.g"):
        tr.forward(dict(params, **{"blocks.0.ln2.g": params["blocks.0.ln2.g"].astype(
            np.float64)}), ids, cfg)
    with pytest.raises(ValueError, match=r"head.w must have shape \(5, 4\)"):
        tr.forward(dict(params, **{"head.w": np.zeros((4, 5), np.float32)}), ids, cfg)
    with pytest.raises(TypeError, match="int64"):
        tr.forward({k: v.astype(np.int64) for k, v in params.items()}, ids, cfg)


def _lane_order_sum(terms):
    """The kernels' row-sum order in NumPy scalars of the terms' dtype: eight lanes (entry
    j to lane j % 8, each from 0), the lanes ((0+1)+(2+3))+((4+5)+(6+7)), then the tail."""
    zero = terms.dtype.type(0)
    n = terms.shape[0]
    full = n - n % 8
    lanes = [zero] * 8
    for j in range(full):
        lanes[j % 8] = lanes[j % 8] + terms[j]
    tail = zero
    for j in range(full, n):
        tail = tail + terms[j]
    s = lanes
    return (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))) + tail


@settings(max_examples=30, deadline=None)
@given(dtype=st.sampled_from([np.float32, np.float64]), seed=seeds, rows=st.integers(1, 6),
       d=st.integers(1, 40))
def test_layernorm_rows_are_summed_in_the_lane_order(dtype, seed, rows, d):
    from stepsim.nn import _kernels as K

    _, r = _rows(dtype, seed, rows, d)
    x, gamma, beta = 10 * r(rows, d) + 3, r(d), r(d)
    out, xhat, rstd = np.empty_like(x), np.empty_like(x), np.empty(rows, dtype)
    K.layernorm_forward(x, gamma, beta, dtype(1e-5), out, xhat, rstd)
    inv_d = dtype(1.0 / d)
    for i in range(rows):
        mean = _lane_order_sum(x[i]) * inv_d
        dev = x[i] - mean
        want = dtype(1) / np.sqrt(_lane_order_sum(dev * dev) * inv_d + dtype(1e-5))
        assert rstd[i].tobytes() == dtype(want).tobytes()
        assert xhat[i].tobytes() == ((x[i] - mean) * want).astype(dtype).tobytes()
