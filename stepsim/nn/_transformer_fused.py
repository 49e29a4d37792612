"""The transformer's forward and backward with fused kernels: ``kernels=True`` of
:mod:`stepsim.nn.transformer`. Private: call ``transformer.forward/backward``.

The same model and the same bits as composing the layers of :mod:`stepsim.nn.layers`,
:mod:`stepsim.nn.attention` and :mod:`stepsim.nn.fused` one call at a time (what
``kernels=True`` did before, recorded in ``tests/nn/test_transformer_bits.py``), in fewer
calls out of Python and without copies:

* every matrix product stays one NumPy matmul on OpenBLAS, with the operands and the
  order it had (the bits of the products are OpenBLAS's) -- but the forward product and
  the input gradient of a masked linear weight handed over with its mask
  (:class:`~stepsim.nn.nm_linear.ForwardWeights`), which run on its kept entries where
  :func:`~stepsim.nn.nm_linear.sparse_pays` (their own fixed order, their own bits);
* the heads are strided views of the stacked Q/K/V product, and the attention's batched
  products write straight into the merged-heads and the Q/K/V-gradient layouts
  (``out=`` views): OpenBLAS takes the strides as leading dimensions, so the copies into
  head-major layouts are gone and the products' bits are unchanged;
* the element-wise work between the products is one kernel pass each: LayerNorm after
  the residual add and the bias of the layer before it (:func:`_kernels.residual_layernorm`),
  bias + GELU, GELU's backward + the bias gradient, LayerNorm's backward + the residual
  path + the next bias gradient (:func:`_kernels.layernorm_backward_residual`), and the
  softmax's backward with the scale of the scores folded in. Each kernel does the scalar
  arithmetic of the NumPy calls it replaces, in their order.

Shapes: B sequences of T tokens, width D, H heads of hd = D / H, MLP width F; the residual
stream is kept as (B*T, D). Float32 runs GELU on its kernel; float64 on the exact
reference (scipy's erf), as :mod:`stepsim.nn.fused` does.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from stepsim.nn import layers as L
from stepsim.nn import nm_linear
from stepsim.nn.embedding import embedding_forward, input_grads


class LayerNormState(NamedTuple):
    """What a LayerNorm's backward reads: xhat (N, D), rstd (N,) and its gain (D,)."""

    xhat: np.ndarray
    rstd: np.ndarray
    gamma: np.ndarray


class FusedBlockCache(NamedTuple):
    """One block's forward values the backward reads.

    ln1, ln2: LayerNormState. a: LN1's output (BT, D), the Q/K/V product's input.
    w_qkv: [wq; wk; wv] (3D, D). qkv: the Q/K/V product with its bias (BT, 3D); the heads
    are views of it. probs: the attention probabilities (B, H, T, T). o: the merged heads
    (BT, D), the output projection's input. m: LN2's output (BT, D), fc1's input.
    u: fc1's output with its bias (BT, F), GELU's input. g: GELU's output (BT, F), fc2's
    input. gelu: what GELU's backward reads (GeluSlope in float32). w_qkv, wo, w1, w2: the
    weights the input gradients multiply by (the forward weights as the step handed them,
    or their :class:`~stepsim.nn.nm_linear.SparseWeight`).
    """

    ln1: LayerNormState
    a: np.ndarray
    w_qkv: np.ndarray
    qkv: np.ndarray
    probs: np.ndarray
    o: np.ndarray
    wo: np.ndarray
    ln2: LayerNormState
    m: np.ndarray
    w1: np.ndarray
    g: np.ndarray
    gelu: object
    w2: np.ndarray


class FusedCache(NamedTuple):
    """emb: the embedding's cache; blocks: FusedBlockCache per block; lnf: the final
    LayerNorm's state; z: its output (BT, D), the head's input; head_w: the head's weight
    (V, D) (tok_emb when tied; or its SparseWeight) for the input gradient; shape: (B, T, D)."""

    emb: object
    blocks: tuple
    lnf: LayerNormState
    z: np.ndarray
    head_w: np.ndarray
    shape: tuple


_K = None


def _kernels():
    """stepsim.nn._kernels, imported on first use (numba), not when stepsim is imported."""
    global _K
    if _K is None:
        from stepsim.nn import _kernels

        _K = _kernels
    return _K


def _layernorm(h, gamma, beta, eps, f=None, bias=None):
    """LayerNorm of the rows of h (N, D); with f, first h += f (+ bias): the residual add of
    the layer before it, in place on h. (out, LayerNormState)."""
    K = _kernels()
    out = np.empty_like(h)
    xhat = np.empty_like(h)
    rstd = np.empty(h.shape[0], h.dtype)
    e = h.dtype.type(eps)
    if f is None:
        K.layernorm_forward(h, gamma, beta, e, out, xhat, rstd)
    else:
        K.residual_layernorm(h, f, gamma if bias is None else bias, bias is not None,
                             gamma, beta, e, out, xhat, rstd)
    return out, LayerNormState(xhat, rstd, gamma)


def _layernorm_backward(dout, state, resid=None, want_sum=False):
    """(dx, dgamma, dbeta, dsum): LayerNorm's backward; with resid, dx = resid + that (a new
    array: written in place, the kernel's stores may alias its loads, and LLVM then does
    not vectorise it); dsum = dx summed over the rows if want_sum, else None."""
    K = _kernels()
    d = dout.shape[1]
    dx = np.empty_like(dout)
    dgamma = np.empty(d, dout.dtype)
    dbeta = np.empty(d, dout.dtype)
    dsum = np.empty(d, dout.dtype) if want_sum else dgamma
    K.layernorm_backward_residual(dout, state.xhat, state.rstd, state.gamma,
                                  dx if resid is None else resid, resid is not None, dx,
                                  dgamma, dbeta, dsum, want_sum)
    return dx, dgamma, dbeta, (dsum if want_sum else None)


class GeluSlope(NamedTuple):
    """GELU's derivative at its input (R, F), saved by the float32 forward."""

    slope: np.ndarray


def _bias_gelu(u, b):
    """u (R, F) += b in place (b may be None), then GELU: (out, what its backward reads:
    GeluSlope in float32, the reference's cache in float64)."""
    if u.dtype == np.float32:
        out = np.empty_like(u)
        slope = np.empty_like(u)
        _kernels().bias_gelu(u, u[0] if b is None else b, b is not None, out, slope)
        return out, GeluSlope(slope)
    if b is not None:
        u += b
    return L.gelu_forward(u)


def _gelu_backward_bias(dout, cache, has_bias):
    """(du, db): GELU's backward and du summed over the rows (None without a bias)."""
    if isinstance(cache, GeluSlope):
        du = np.empty_like(dout)
        db = np.empty(dout.shape[1], dout.dtype) if has_bias else du[0]
        _kernels().slope_backward_bias(dout, cache.slope, du, db, has_bias)
        return du, (db if has_bias else None)
    du = L.gelu_backward(dout, cache)
    return du, (du.sum(axis=0) if has_bias else None)


def _heads(qkv, b, t, n_heads, hd):
    """q, k, v (B, H, T, hd) of the stacked product qkv (B*T, 3D): strided views, or, when
    a head is a vector (hd = 1 or T = 1), contiguous copies. NumPy hands a (T, 1) operand
    to BLAS as a vector, and a strided vector took another path than a contiguous one
    (other bits, found by the composition test), so vector-shaped heads keep the layout
    they had."""
    five = qkv.reshape(b, t, 3, n_heads, hd)
    if hd == 1 or t == 1:
        return tuple(np.ascontiguousarray(five.transpose(2, 0, 3, 1, 4)))
    return tuple(five[:, :, i].transpose(0, 2, 1, 3) for i in range(3))


def _product_into(a, b, out):
    """out[...] = a @ b (batched): written in place (``out=``) when out's matrices are
    strided views of a wider layout, else (vector-shaped: hd = 1 or T = 1) computed apart
    and copied (module docstring, :func:`_heads`)."""
    if out.shape[-1] > 1 and out.shape[-2] > 1:
        np.matmul(a, b, out=out)
    else:
        out[...] = a @ b


# --------------------------------------------------------------------------- forward
def forward(params, ids, cfg):
    """(logits (B, T, V), FusedCache): :func:`stepsim.nn.transformer.forward`'s kernels path."""
    K = _kernels()
    h, emb = embedding_forward(ids, params["tok_emb"], params["pos_emb"])
    b, t, d = h.shape
    n_heads = cfg.heads
    hd = d // n_heads  # the head width
    scale = 1.0 / np.sqrt(hd)
    fast_exp = h.dtype == np.float32
    h = h.reshape(b * t, d)
    a, ln1 = _layernorm(h, params["blocks.0.ln1.g"], params["blocks.0.ln1.b"], cfg.eps)
    caches = []
    rows = b * t
    for i in range(cfg.blocks):
        p = f"blocks.{i}."
        w_qkv, w_qkv_back = nm_linear.stacked_weights_for(
            params, (p + "attn.wq", p + "attn.wk", p + "attn.wv"), rows)
        qkv = nm_linear.product(a, w_qkv)  # (BT, 3D)
        if cfg.bias:
            K.add_bias(qkv, np.concatenate([params[p + "attn.bq"], params[p + "attn.bk"],
                                            params[p + "attn.bv"]]))
        q, k, v = _heads(qkv, b, t, n_heads, hd)
        probs = q @ k.swapaxes(-1, -2)  # (B, H, T, T), C-contiguous: the softmax's input
        K.causal_softmax(probs.reshape(-1, t, t), probs.dtype.type(scale), fast_exp)
        o = np.empty((b, t, n_heads, hd), h.dtype)
        _product_into(probs, v, o.transpose(0, 2, 1, 3))  # heads merged as they are written
        o = o.reshape(b * t, d)
        (wo, wo_back), (w1, w1_back), (w2, w2_back) = (
            nm_linear.weights_for(params, p + name, rows)
            for name in ("attn.wo", "mlp.w1", "mlp.w2"))
        att = nm_linear.product(o, wo)
        m, ln2 = _layernorm(h, params[p + "ln2.g"], params[p + "ln2.b"], cfg.eps, att,
                            params.get(p + "attn.bo"))
        u = nm_linear.product(m, w1)
        g, gelu = _bias_gelu(u, params.get(p + "mlp.b1"))
        f = nm_linear.product(g, w2)
        nxt = f"blocks.{i + 1}.ln1." if i + 1 < cfg.blocks else "lnf."
        ln1_next = _layernorm(h, params[nxt + "g"], params[nxt + "b"], cfg.eps, f,
                              params.get(p + "mlp.b2"))
        caches.append(FusedBlockCache(ln1, a, w_qkv_back, qkv, probs, o, wo_back, ln2, m,
                                      w1_back, g, gelu, w2_back))
        a, ln1 = ln1_next
    z, lnf = a, ln1  # the last block's "next LayerNorm" is the final one
    head_w, head_back = ((params["tok_emb"],) * 2 if cfg.tied
                         else nm_linear.weights_for(params, "head.w", rows))
    logits = nm_linear.product(z, head_w)
    return logits.reshape(b, t, cfg.vocab), FusedCache(emb, tuple(caches), lnf, z, head_back,
                                                       (b, t, d))


# --------------------------------------------------------------------------- backward
def backward(dlogits, cache: FusedCache, cfg) -> dict:
    """Gradients (name -> array, C-contiguous) from dlogits (B, T, V): the kernels path of
    :func:`stepsim.nn.transformer.backward`."""
    b, t, d = cache.shape
    n_heads = cfg.heads
    hd = d // n_heads  # the head width
    scale = 1.0 / np.sqrt(hd)
    K = _kernels()
    grads = {}
    dl = dlogits.reshape(b * t, cfg.vocab)
    dz = nm_linear.input_grad(dl, cache.head_w)
    dhead = dl.T @ cache.z
    dh, grads["lnf.g"], grads["lnf.b"], dsum = _layernorm_backward(dz, cache.lnf,
                                                                   want_sum=cfg.bias)
    for i in reversed(range(cfg.blocks)):
        p = f"blocks.{i}."
        c = cache.blocks[i]
        # MLP: dsum is dh summed over the rows, fc2's bias gradient
        dg = nm_linear.input_grad(dh, c.w2)
        grads[p + "mlp.w2"] = dh.T @ c.g
        du, db1 = _gelu_backward_bias(dg, c.gelu, cfg.bias)
        dm = nm_linear.input_grad(du, c.w1)
        grads[p + "mlp.w1"] = du.T @ c.m
        if cfg.bias:
            grads[p + "mlp.b1"], grads[p + "mlp.b2"] = db1, dsum
        dh, grads[p + "ln2.g"], grads[p + "ln2.b"], dsum = _layernorm_backward(
            dm, c.ln2, dh, want_sum=cfg.bias)
        # attention: dsum is now the output projection's bias gradient
        do = nm_linear.input_grad(dh, c.wo)
        grads[p + "attn.wo"] = dh.T @ c.o
        do4 = do.reshape(b, t, n_heads, hd).transpose(0, 2, 1, 3)
        q, k, v = _heads(c.qkv, b, t, n_heads, hd)
        dqkv = np.empty((b * t, 3 * d), dh.dtype)
        dq, dk, dv = (dqkv.reshape(b, t, 3, n_heads, hd)[:, :, i].transpose(0, 2, 1, 3)
                      for i in range(3))  # views: the products below write into dqkv
        probs_t = c.probs.swapaxes(-1, -2)
        _product_into(probs_t, do4, dv)
        dscores = do4 @ v.swapaxes(-1, -2)  # (B, H, T, T), C-contiguous
        K.causal_softmax_backward(c.probs.reshape(-1, t, t), dscores.reshape(-1, t, t),
                                  dscores.dtype.type(scale))
        _product_into(dscores, k, dq)
        _product_into(dscores.swapaxes(-1, -2), q, dk)
        da = nm_linear.input_grad(dqkv, c.w_qkv)
        dw = dqkv.T @ c.a
        grads[p + "attn.wq"], grads[p + "attn.wk"], grads[p + "attn.wv"] = (
            dw[:d], dw[d:2 * d], dw[2 * d:])
        if cfg.bias:
            dbqkv = np.empty(3 * d, dqkv.dtype)
            K.rows_sum(dqkv, dbqkv)  # dqkv.sum(axis=0)'s order
            grads[p + "attn.bq"], grads[p + "attn.bk"], grads[p + "attn.bv"] = (
                dbqkv[:d], dbqkv[d:2 * d], dbqkv[2 * d:])
            grads[p + "attn.bo"] = dsum
        dh, grads[p + "ln1.g"], grads[p + "ln1.b"], dsum = _layernorm_backward(
            da, c.ln1, dh, want_sum=cfg.bias and i > 0)
    input_grads(dh.reshape(b, t, d), cache.emb, dhead, cfg.tied, grads)
    return grads
