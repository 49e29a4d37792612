"""LayerNorm and GELU on numba kernels, drop-in for those of :mod:`stepsim.nn.layers`.

Same signatures, same caches and the same results to rounding: the layers in
:mod:`stepsim.nn.layers` are the NumPy references these are tested against. Used by the
transformer (``kernels=True``), where this element-wise work would otherwise cost as much
as the matrix products. Inputs are 2-d (rows, D) for LayerNorm (the transformer's
activations are kept as (B*T, D)); other shapes go through the reference layers.

GELU in float32 evaluates the normal CDF with Abramowitz & Stegun 7.1.26 (absolute error
<= 1.5e-7, the approximation torch's vectorised float32 erf uses) and exp(-x^2/2) with a
vectorised float32 exp (:func:`stepsim.nn._kernels.exp_nonpositive_f32`); float64 calls
the exact reference (scipy's erf), so finite-difference checks see the exact function.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from stepsim.nn import layers as L

_F32 = np.dtype(np.float32)


def layernorm_forward(x, gamma, beta, eps: float = 1e-5):
    """:func:`stepsim.nn.layers.layernorm_forward` for C-contiguous x (N, D)."""
    if x.ndim != 2 or not x.flags.c_contiguous or x.dtype not in L.FLOATS:
        return L.layernorm_forward(x, gamma, beta, eps)
    L.check_same_dtype("x", x, "gamma", gamma)
    L.check_same_dtype("x", x, "beta", beta)
    L.check_shape("gamma", gamma, (x.shape[-1],), "x's last axis")
    L.check_shape("beta", beta, (x.shape[-1],), "x's last axis")
    if not (isinstance(eps, (int, float)) and eps > 0 and np.isfinite(eps)):
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}")
    from stepsim.nn import _kernels as K

    out = np.empty_like(x)
    xhat = np.empty_like(x)
    rstd = np.empty((x.shape[0], 1), dtype=x.dtype)
    K.layernorm_forward(x, gamma, beta, x.dtype.type(eps), out, xhat, rstd[:, 0])
    return out, L.LayerNormCache(xhat, rstd, gamma)


def layernorm_backward(dout, cache: L.LayerNormCache):
    """:func:`stepsim.nn.layers.layernorm_backward`: (dx, dgamma, dbeta)."""
    xhat, rstd, gamma = cache
    if xhat.ndim != 2 or dout.dtype != xhat.dtype:
        return L.layernorm_backward(dout, cache)
    L.check_shape("dout", dout, xhat.shape, "the forward input's")
    from stepsim.nn import _kernels as K

    dout = np.ascontiguousarray(dout)
    dx = np.empty_like(dout)
    dgamma = np.empty(xhat.shape[1], dtype=dout.dtype)
    dbeta = np.empty_like(dgamma)
    K.layernorm_backward(dout, xhat, rstd[:, 0], gamma, dx, dgamma, dbeta)
    return dx, dgamma, dbeta


class GeluCache(NamedTuple):
    """x: the float32 input (the backward recomputes Phi and phi from it)."""

    x: np.ndarray


def gelu_forward(x):
    """:func:`stepsim.nn.layers.gelu_forward`; float32 on the kernel (module docstring)."""
    if not isinstance(x, np.ndarray) or x.dtype != _F32:
        return L.gelu_forward(x)
    from stepsim.nn import _kernels as K

    x = np.ascontiguousarray(x)
    out = np.empty_like(x)
    K.gelu_forward(x.reshape(-1), out.reshape(-1))
    return out, GeluCache(x)


def gelu_backward(dout, cache):
    """:func:`stepsim.nn.layers.gelu_backward`: dx = dout * (Phi(x) + x phi(x))."""
    if not isinstance(cache, GeluCache):
        return L.gelu_backward(dout, cache)
    x = cache.x
    L.check_shape("dout", dout, x.shape, "the forward input's")
    if dout.dtype != _F32:
        raise TypeError(f"dout has dtype {dout.dtype} but the forward ran in float32")
    from stepsim.nn import _kernels as K

    dout = np.ascontiguousarray(dout)
    dx = np.empty_like(dout)
    K.gelu_backward(dout.reshape(-1), x.reshape(-1), dx.reshape(-1))
    return dx


def softmax_cross_entropy(logits, labels):
    """:func:`stepsim.nn.layers.softmax_cross_entropy` in one kernel pass (the same checks,
    the same arithmetic in the same order: the same bits). (loss, dlogits)."""
    L.check_float("logits", logits)
    if not isinstance(labels, np.ndarray) or labels.dtype.kind not in "iu":
        return L.softmax_cross_entropy(logits, labels)  # raises, naming the problem
    if logits.ndim < 1 or labels.shape != logits.shape[:-1] or labels.size == 0:
        return L.softmax_cross_entropy(logits, labels)
    from stepsim.nn import _kernels as K

    c = logits.shape[-1]
    rows = labels.size
    flat = np.ascontiguousarray(logits.reshape(rows, c))
    probs = np.empty_like(flat)
    logs = np.empty(rows, logits.dtype)
    picked = np.empty(rows, logits.dtype)
    # the loss's two float64 sums in the kernel too, while they are one pairwise sum each:
    # NumPy casts a float32 array in chunks of its buffer size and sums chunk by chunk
    sums = np.empty(2 if rows <= np.getbufsize() or logits.dtype == np.float64 else 0)
    if K.softmax_xent(flat, labels.reshape(rows), logits.dtype.type(1 / rows), probs, logs,
                      picked, sums):
        return L.softmax_cross_entropy(logits, labels)  # raises: labels outside [0, C)
    if sums.shape[0]:
        total = sums[0] - sums[1]
    else:
        total = np.sum(logs, dtype=np.float64) - np.sum(picked, dtype=np.float64)
    loss = float(total) / rows
    return loss, probs.reshape(logits.shape)


def linear_relu_forward(x, w, b, w_backward=None):
    """``maximum(x @ w.T + b, 0)`` for 2-d x (R, in): the matrix product on BLAS (or, for a
    :class:`~stepsim.nn.nm_linear.SparseWeight` w, on its kept entries), the bias and the
    rectifier in one kernel pass, in place on the product (the bits of
    :func:`stepsim.nn.layers.linear_forward` then ``np.maximum(out, 0)`` for a dense w).
    (out, its LinearCache): out is also what the rectifier's backward reads; the cache
    holds ``w_backward`` (default w), the weight the input gradient multiplies by."""
    from stepsim.nn import _kernels as K
    from stepsim.nn import nm_linear

    if isinstance(w, np.ndarray):
        out, _ = L.linear_forward(x, w, None)
    else:
        out = nm_linear.product(x, w)
    if b is not None:
        L.check_same_dtype("x", x, "b", b)
        L.check_shape("b", b, (w.shape[0],), "w's out")
    if out.ndim != 2:  # the kernel takes (R, D): other shapes on NumPy
        if b is not None:
            out += b
        np.maximum(out, 0, out=out)
    else:
        K.bias_relu(out, out[0] if b is None else b, b is not None)
    return out, L.LinearCache(x, w if w_backward is None else w_backward, b is not None)


def relu_backward_bias_grad(dout, saved, has_bias):
    """(dout * (saved > 0) in place on dout, its sum over the rows or None): the rectifier's
    backward and the bias gradient of the Linear below it in one pass, for 2-d dout."""
    from stepsim.nn import _kernels as K

    if dout.ndim != 2 or not dout.flags.c_contiguous or saved.shape != dout.shape:
        np.multiply(dout, saved > 0, out=dout)
        return dout, dout.reshape(-1, dout.shape[-1]).sum(axis=0) if has_bias else None
    db = np.empty(dout.shape[1], dout.dtype) if has_bias else dout[0]
    K.relu_backward_bias(dout, saved, db, has_bias)
    return dout, db if has_bias else None
