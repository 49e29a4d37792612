"""Forward/backward pairs for small networks, written by hand (no autograd), CS231n style.

Every layer is two pure functions: ``*_forward(...) -> (out, cache)`` and
``*_backward(dout, cache) -> grads``. A cache is a NamedTuple holding what the backward
pass needs. Computations run in the dtype of the input (float32 by default in stepsim's
problems, float64 for finite-difference checks); a mixed-dtype call is a ``TypeError``
rather than a silent upcast. Layers never mask weights: a recipe hands the problem the
forward weights (the mask already applied).

Shapes use ``...`` for any number of leading (batch, position) axes. A Linear weight is
stored (out, in), as torch's ``nn.Linear``, so N:M groups run along the input axis
(``ParamSpec(n, m, axis=-1)``).

Losses return ``(loss, dlogits)`` with ``loss`` a Python float (accumulated in float64) and
the gradient in the input dtype:

- :func:`softmax_cross_entropy`: mean over all label positions (torch's
  ``F.cross_entropy(reduction="mean")``).
- :func:`mse_loss`: ``0.5 / B * sum((pred - target) ** 2)`` with ``B = pred.shape[0]``
  (half the squared error summed over every axis but the first, averaged over the first),
  the convention of :class:`stepsim.problems.synthetic.SyntheticRegression`.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np

from stepsim._ground import libm as _libm

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def check_float(name: str, array) -> np.ndarray:
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a NumPy array, got {type(array).__name__}")
    if array.dtype not in FLOATS:
        raise TypeError(f"{name} must be float32 or float64, got dtype {array.dtype}")
    return array


def check_same_dtype(ref_name: str, ref: np.ndarray, name: str, array: np.ndarray) -> None:
    check_float(name, array)
    if array.dtype != ref.dtype:
        raise TypeError(f"{name} has dtype {array.dtype} but {ref_name} has {ref.dtype}; "
                        f"cast one of them (layers compute in one dtype, no silent upcast)")


def check_shape(name: str, array: np.ndarray, shape: tuple, ref: str) -> None:
    if array.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)} ({ref}), got {array.shape}")


def _leading_size(shape: tuple) -> int:
    return int(math.prod(shape[:-1]))


# ---------------------------------------------------------------------------- Linear
class LinearCache(NamedTuple):
    """x (..., in) the layer's input; w (out, in) its weight; has_bias whether b was given."""

    x: np.ndarray
    w: np.ndarray
    has_bias: bool


def linear_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray | None):
    """Affine map ``out = x @ w.T + b``.

    Parameters
    ----------
    x : ndarray (..., in)
    w : ndarray (out, in), same dtype as x
    b : ndarray (out,) or None (no bias)

    Returns
    -------
    out : ndarray (..., out)
    cache : LinearCache
    """
    check_float("x", x)
    check_same_dtype("x", x, "w", w)
    if w.ndim != 2:
        raise ValueError(f"w must be 2-D (out, in), got shape {w.shape}")
    if x.ndim < 1 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"x has shape {x.shape} but w has shape {w.shape}: "
                         f"x's last axis must equal w's in = {w.shape[1]}")
    out = x @ w.T
    if b is not None:
        check_same_dtype("x", x, "b", b)
        check_shape("b", b, (w.shape[0],), "w's out")
        out += b
    return out, LinearCache(x, w, b is not None)


def linear_backward(dout: np.ndarray, cache: LinearCache):
    """Gradients of the affine map; leading axes of x are summed into dw and db.

    Parameters
    ----------
    dout : ndarray (..., out), upstream gradient
    cache : LinearCache from :func:`linear_forward`

    Returns
    -------
    dx : ndarray (..., in)
    dw : ndarray (out, in), C-contiguous
    db : ndarray (out,) or None when the forward had no bias
    """
    x, w, has_bias = cache
    check_same_dtype("x", x, "dout", dout)
    check_shape("dout", dout, x.shape[:-1] + (w.shape[0],), "x's leading axes, w's out")
    rows = _leading_size(x.shape)
    dout2 = dout.reshape(rows, w.shape[0])
    dx = dout @ w
    dw = dout2.T @ x.reshape(rows, w.shape[1])
    db = dout2.sum(axis=0) if has_bias else None
    return dx, np.ascontiguousarray(dw), db


# ------------------------------------------------------------------ activations
class ActivationCache(NamedTuple):
    """What an element-wise activation's backward needs (one array, the input's shape)."""

    saved: np.ndarray


def relu_forward(x: np.ndarray):
    """``out = max(x, 0)``. x (...) -> out (...) and an ActivationCache."""
    check_float("x", x)
    out = np.maximum(x, 0)
    return out, ActivationCache(out)


def relu_backward(dout: np.ndarray, cache: ActivationCache) -> np.ndarray:
    """dx (...) = dout where x > 0 else 0 (the subgradient at 0 is 0, as torch)."""
    out = cache.saved
    check_shape("dout", dout, out.shape, "the forward input's")
    return np.where(out > 0, dout, dout.dtype.type(0))


def tanh_forward(x: np.ndarray):
    """``out = tanh(x)``. x (...) -> out (...) and an ActivationCache."""
    check_float("x", x)
    out = _libm.tanh(x)
    return out, ActivationCache(out)


def tanh_backward(dout: np.ndarray, cache: ActivationCache) -> np.ndarray:
    """dx (...) = dout * (1 - tanh(x)^2)."""
    out = cache.saved
    check_shape("dout", dout, out.shape, "the forward input's")
    return dout * (1 - out * out)


_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _erf(x: np.ndarray) -> np.ndarray:
    """scipy.special.erf, imported on first use: scipy.special is a large part of the
    import of every process that builds a model, most of which never take a GELU."""
    from scipy import special

    return special.erf(x)


def gelu_forward(x: np.ndarray):
    """Exact GELU, ``out = x * Phi(x)`` with Phi the normal CDF via erf (torch.nn.GELU()).

    x (...) -> out (...) and an ActivationCache holding x.
    """
    check_float("x", x)
    cdf = _erf(x * x.dtype.type(_INV_SQRT2))
    cdf += 1
    cdf *= x.dtype.type(0.5)
    return x * cdf, ActivationCache(x)


def gelu_backward(dout: np.ndarray, cache: ActivationCache) -> np.ndarray:
    """dx (...) = dout * (Phi(x) + x * phi(x)), phi the normal density."""
    x = cache.saved
    check_shape("dout", dout, x.shape, "the forward input's")
    t = x.dtype.type
    cdf = t(0.5) * (1 + _erf(x * t(_INV_SQRT2)))
    pdf = t(_INV_SQRT_2PI) * _libm.exp(t(-0.5) * x * x)
    return dout * (cdf + x * pdf)


# -------------------------------------------------------------------- LayerNorm
class LayerNormCache(NamedTuple):
    """xhat (...,D) the normalised input; rstd (...,1) = 1/sqrt(var + eps); gamma (D,)."""

    xhat: np.ndarray
    rstd: np.ndarray
    gamma: np.ndarray


def layernorm_forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5):
    """Layer normalisation over the last axis (biased variance, as torch.nn.LayerNorm).

    Parameters
    ----------
    x : ndarray (..., D)
    gamma, beta : ndarray (D,), same dtype as x
    eps : float > 0, added to the variance

    Returns
    -------
    out : ndarray (..., D) = gamma * (x - mean) / sqrt(var + eps) + beta
    cache : LayerNormCache
    """
    check_float("x", x)
    check_same_dtype("x", x, "gamma", gamma)
    check_same_dtype("x", x, "beta", beta)
    if x.ndim < 1:
        raise ValueError(f"x must have at least one axis, got shape {x.shape}")
    check_shape("gamma", gamma, (x.shape[-1],), "x's last axis")
    check_shape("beta", beta, (x.shape[-1],), "x's last axis")
    if not (isinstance(eps, numbers.Real) and eps > 0 and math.isfinite(eps)):
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}")
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    rstd = 1 / np.sqrt(var + x.dtype.type(eps))
    xhat = centred * rstd
    return xhat * gamma + beta, LayerNormCache(xhat, rstd, gamma)


def layernorm_backward(dout: np.ndarray, cache: LayerNormCache):
    """Gradients of :func:`layernorm_forward`.

    Returns
    -------
    dx : ndarray (..., D)
    dgamma, dbeta : ndarray (D,), summed over the leading axes
    """
    xhat, rstd, gamma = cache
    check_shape("dout", dout, xhat.shape, "the forward input's")
    d = xhat.shape[-1]
    rows = _leading_size(xhat.shape)
    dgamma = np.sum((dout * xhat).reshape(rows, d), axis=0)
    dbeta = np.sum(dout.reshape(rows, d), axis=0)
    dxhat = dout * gamma
    # dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), all over the last axis
    mean_dxhat = dxhat.mean(axis=-1, keepdims=True)
    mean_dxhat_xhat = np.mean(dxhat * xhat, axis=-1, keepdims=True)
    dx = (dxhat - mean_dxhat - xhat * mean_dxhat_xhat) * rstd
    return dx, dgamma, dbeta


# ----------------------------------------------------------------------- losses
def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray):
    """Mean softmax cross-entropy over all label positions.

    Parameters
    ----------
    logits : ndarray (..., C), float32 or float64
    labels : integer ndarray (...), values in [0, C)

    Returns
    -------
    loss : float, mean over the positions of -log softmax(logits)[label] (max-subtracted,
        so large logits do not overflow)
    dlogits : ndarray (..., C) in logits' dtype, (softmax - onehot) / number of positions
    """
    check_float("logits", logits)
    if not isinstance(labels, np.ndarray) or labels.dtype.kind not in "iu":
        raise TypeError(f"labels must be an integer NumPy array, got "
                        f"{getattr(labels, 'dtype', type(labels).__name__)}")
    if logits.ndim < 1 or labels.shape != logits.shape[:-1]:
        raise ValueError(f"labels must have shape logits.shape[:-1] = {logits.shape[:-1]}, "
                         f"got {labels.shape}")
    c = logits.shape[-1]
    rows = labels.size
    if rows == 0:
        raise ValueError("softmax_cross_entropy needs at least one label position")
    flat_labels = labels.reshape(rows)
    if flat_labels.min() < 0 or flat_labels.max() >= c:
        raise ValueError(f"labels must lie in [0, {c}), got values in "
                         f"[{flat_labels.min()}, {flat_labels.max()}]")
    shifted = logits.reshape(rows, c) - logits.reshape(rows, c).max(axis=1, keepdims=True)
    probs = _libm.exp(shifted)  # not np.exp: its bits depend on the CPU (stepsim._ground.libm)
    total = probs.sum(axis=1, keepdims=True)
    picked = shifted[np.arange(rows), flat_labels]
    # per-row loss log(sum exp) - shifted[label], accumulated in float64
    loss = float(np.sum(_libm.log(total[:, 0]), dtype=np.float64)
                 - np.sum(picked, dtype=np.float64)) / rows
    probs /= total
    probs[np.arange(rows), flat_labels] -= 1
    probs *= logits.dtype.type(1 / rows)
    return loss, probs.reshape(logits.shape)


def mse_loss(pred: np.ndarray, target: np.ndarray):
    """Half squared error, averaged over the first (batch) axis.

    Parameters
    ----------
    pred : ndarray (B, ...), float32 or float64
    target : ndarray of pred's shape and dtype

    Returns
    -------
    loss : float, 0.5 / B * sum((pred - target) ** 2), summed in float64
    dpred : ndarray (B, ...) = (pred - target) / B
    """
    check_float("pred", pred)
    check_same_dtype("pred", pred, "target", target)
    if pred.ndim < 1 or pred.shape[0] == 0:
        raise ValueError(f"pred must have a non-empty first (batch) axis, got shape {pred.shape}")
    check_shape("target", target, pred.shape, "pred's")
    diff = pred - target
    batch = pred.shape[0]
    loss = 0.5 * float(np.sum(np.square(diff, dtype=np.float64))) / batch
    diff *= pred.dtype.type(1 / batch)
    return loss, diff
