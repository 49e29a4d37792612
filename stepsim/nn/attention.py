"""Causal multi-head self-attention, forward and backward by hand.

Shapes: B sequences, T positions, D = H * dh model width, H heads of width dh.

    q, k, v = x Wq^T + bq, x Wk^T + bk, x Wv^T + bv          (B, T, D) -> (B, H, T, dh)
    S = q k^T / sqrt(dh), S[i, j] = -inf for j > i            (B, H, T, T) causal scores
    P = softmax(S) along the last axis (max subtracted first)
    o = P v -> (B, T, D);  out = o Wo^T + bo

Weights are stored (out, in) like every stepsim linear layer, so N:M groups run along the
input axis; Q, K and V are computed by one matrix product with their weights stacked.
The softmax and its backward run in numba kernels (:mod:`stepsim.nn._kernels`) on the
lower triangle only; :func:`causal_softmax_reference` and :func:`softmax_backward_reference`
are the plain NumPy definitions they are tested against.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from stepsim._ground import libm as _libm
from stepsim.nn.layers import LinearCache, linear_backward, linear_forward

ATTENTION_WEIGHTS = ("wq", "wk", "wv", "wo")
ATTENTION_BIASES = ("bq", "bk", "bv", "bo")


# --------------------------------------------------------------------------- softmax
def causal_softmax_reference(scores: np.ndarray, scale: float) -> np.ndarray:
    """softmax(scale * scores) over the last axis with entries j > i masked out.

    scores: (..., T, T). Returns probabilities of the same shape and dtype, exactly 0 above
    the diagonal. The row maximum is subtracted before exp, so large scores cannot overflow.
    """
    t = scores.shape[-1]
    s = scores * scores.dtype.type(scale)
    s = np.where(np.tri(t, dtype=bool), s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    e = _libm.exp(s)
    return (e / e.sum(axis=-1, keepdims=True)).astype(scores.dtype, copy=False)


def softmax_backward_reference(probs: np.ndarray, dprobs: np.ndarray) -> np.ndarray:
    """d loss / d logits of a softmax: P * (dP - sum_j dP_j P_j), row by row (..., T, T)."""
    return probs * (dprobs - np.sum(dprobs * probs, axis=-1, keepdims=True))


def causal_softmax(scores: np.ndarray, scale: float) -> np.ndarray:
    """:func:`causal_softmax_reference` in a numba kernel, in place on ``scores`` (returned).

    scores: C-contiguous float32/float64 (..., T, T); it is overwritten with the
    probabilities (the lower triangle is computed, the upper set to 0). float32 uses a
    vectorised exp (relative error < 2 ulps, exponents below -87 give 0); float64 math.exp.
    """
    _check_square(scores, "scores")
    from stepsim.nn import _kernels as K

    rows = scores.reshape(-1, scores.shape[-1], scores.shape[-1])
    K.causal_softmax(rows, scores.dtype.type(scale), scores.dtype == np.float32)
    return scores


def softmax_backward(probs: np.ndarray, dprobs: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """:func:`softmax_backward_reference` times ``scale`` in a numba kernel, written into
    ``dprobs`` (returned): the gradient of the scores when the softmax took scale * scores
    (the bits of the reference, then ``*= scale``; scale 1 is the reference's bits).

    Only the lower triangle is computed: the probabilities above it are 0, and so is
    their gradient.
    """
    _check_square(probs, "probs")
    _check_square(dprobs, "dprobs")
    if probs.shape != dprobs.shape or probs.dtype != dprobs.dtype:
        raise ValueError(f"probs {probs.shape} {probs.dtype} and dprobs {dprobs.shape} "
                         f"{dprobs.dtype} must match")
    from stepsim.nn import _kernels as K

    t = probs.shape[-1]
    K.causal_softmax_backward(probs.reshape(-1, t, t), dprobs.reshape(-1, t, t),
                              probs.dtype.type(scale))
    return dprobs


def _check_square(a, name):
    if not isinstance(a, np.ndarray) or a.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name} must be a float32 or float64 ndarray, got "
                        f"{type(a).__name__} {getattr(a, 'dtype', '')}")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name} must have shape (..., T, T), got {a.shape}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")


# --------------------------------------------------------------------------- attention core
class AttentionCache(NamedTuple):
    """q, k, v: (B, H, T, dh); probs: (B, H, T, T), zero above the diagonal; scale: 1/sqrt(dh)."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    probs: np.ndarray
    scale: float


def causal_attention_forward(q, k, v, *, kernel: bool = True):
    """Causal scaled dot-product attention of every head.

    Parameters
    ----------
    q, k, v : ndarray, shape (B, H, T, dh)
        Queries, keys and values (one dtype).
    kernel : bool
        Use the numba softmax (default) or the NumPy reference.

    Returns
    -------
    out : ndarray, shape (B, H, T, dh)
        softmax(q k^T / sqrt(dh), causal) v.
    cache : AttentionCache
    """
    if q.ndim != 4 or k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k, v must have one shape (B, H, T, dh), got {q.shape}, "
                         f"{k.shape}, {v.shape}")
    scale = 1.0 / np.sqrt(q.shape[-1])
    scores = q @ k.swapaxes(-1, -2)
    if kernel:
        probs = causal_softmax(np.ascontiguousarray(scores), scale)
    else:
        probs = causal_softmax_reference(scores, scale)
    return probs @ v, AttentionCache(q, k, v, probs, scale)


def causal_attention_backward(dout, cache: AttentionCache, *, kernel: bool = True):
    """(dq, dk, dv), each (B, H, T, dh), from dout (B, H, T, dh)."""
    q, k, v, probs, scale = cache
    dv = probs.swapaxes(-1, -2) @ dout
    dprobs = np.ascontiguousarray(dout @ v.swapaxes(-1, -2))
    # the scale sits inside the softmax: d/dq (s q k^T) = s dS k
    if kernel:
        dscores = softmax_backward(probs, dprobs, scale)
    else:
        dscores = softmax_backward_reference(probs, dprobs)
        dscores *= dscores.dtype.type(scale)
    return dscores @ k, dscores.swapaxes(-1, -2) @ q, dv


# --------------------------------------------------------------------------- the layer
class SelfAttentionCache(NamedTuple):
    """qkv: the stacked Q/K/V linear's cache; core: the AttentionCache; out: the output
    projection's cache (its input is the merged heads (B, T, D)); n_heads: H."""

    qkv: LinearCache
    core: AttentionCache
    out: LinearCache
    n_heads: int


def self_attention_forward(x, params, n_heads: int, *, kernel: bool = True):
    """Causal multi-head self-attention of x (B, T, D).

    Parameters
    ----------
    x : ndarray, shape (B, T, D)
    params : mapping
        wq, wk, wv, wo of shape (D, D), stored (out, in); bq, bk, bv, bo of shape (D,) or
        absent (no bias).
    n_heads : int
        H; must divide D.

    Returns
    -------
    out : ndarray, shape (B, T, D)
    cache : SelfAttentionCache
    """
    b, t, d = x.shape
    if d % n_heads:
        raise ValueError(f"n_heads = {n_heads} must divide the width {d}")
    dh = d // n_heads
    w = np.concatenate([params["wq"], params["wk"], params["wv"]])
    bias = np.concatenate([params["bq"], params["bk"], params["bv"]]) if "bq" in params else None
    qkv, qkv_cache = linear_forward(x.reshape(b * t, d), w, bias)  # (BT, 3D)
    # one copy into (3, B, H, T, dh): the batched products below then run on contiguous heads
    qkv = np.ascontiguousarray(qkv.reshape(b, t, 3, n_heads, dh).transpose(2, 0, 3, 1, 4))
    heads, core = causal_attention_forward(qkv[0], qkv[1], qkv[2], kernel=kernel)
    o = heads.transpose(0, 2, 1, 3).reshape(b * t, d)
    out, out_cache = linear_forward(o, params["wo"], params.get("bo"))
    return out.reshape(b, t, d), SelfAttentionCache(qkv_cache, core, out_cache, n_heads)


def self_attention_backward(dout, cache: SelfAttentionCache, *, kernel: bool = True):
    """(dx (B, T, D), grads) where grads has wq, wk, wv, wo (and the biases when present)."""
    qkv_cache, core, out_cache, n_heads = cache
    b, t, d = dout.shape
    dh = d // n_heads
    do, dwo, dbo = linear_backward(dout.reshape(b * t, d), out_cache)
    do = do.reshape(b, t, n_heads, dh).transpose(0, 2, 1, 3)
    dq, dk, dv = causal_attention_backward(do, core, kernel=kernel)
    dqkv = np.empty((b, t, 3, n_heads, dh), dtype=dout.dtype)
    for i, grad in enumerate((dq, dk, dv)):
        dqkv[:, :, i] = grad.transpose(0, 2, 1, 3)
    dx, dw, db = linear_backward(dqkv.reshape(b * t, 3 * d), qkv_cache)
    dx = dx.reshape(b, t, d)
    grads = {"wq": dw[:d], "wk": dw[d:2 * d], "wv": dw[2 * d:], "wo": dwo}
    if db is not None:
        grads.update(bq=db[:d], bk=db[d:2 * d], bv=db[2 * d:], bo=dbo)
    return dx, {k: np.ascontiguousarray(g) for k, g in grads.items()}
