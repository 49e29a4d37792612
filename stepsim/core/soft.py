"""S-STE's continuous pruning function (Hu, Zhu & Chen, NeurIPS 2024, arXiv 2409.09099).

For each group of M consecutive entries along ``axis`` (the N:M groups of
:mod:`stepsim.core.masks`), t is the (N+1)-th largest |w| of the group and

    S(w)_i = sign(w_i) (|w_i| - t)   for the N kept entries (the N:M mask of |w|),
    S(w)_i = 0                        for the others                (the soft threshold),

a soft threshold: S is continuous in w (an entry enters or leaves the kept set only where
its |w| equals t, where S is 0 on both sides) and S(w) is N:M. The forward weight is
beta * S(w) with beta = <w, S(w)> / <S(w), S(w)> per weight tensor, computed once
and then frozen (the recipe keeps it; :class:`stepsim.recipes.maskers.SoftThresholdMask`).

Kernels: :mod:`stepsim.core._soft_kernels`; references: :mod:`stepsim.core.reference`.
"""

from __future__ import annotations

import numpy as np

from stepsim._ground.validate import check_float_array, check_real

SOFT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _groups(a, axis, m):
    return np.ascontiguousarray(np.moveaxis(a, axis, -1)).reshape(-1)


def soft_from_mask(w, mask, m, axis, beta):
    """beta * S(w) given w's N:M ``mask`` (trusted: same shape, M tiles ``axis``)."""
    from stepsim.core import _soft_kernels as k

    moved_shape = np.moveaxis(w, axis, -1).shape
    flat_w = _groups(w, axis, m)
    flat_keep = _groups(mask, axis, m).view(np.uint8)
    out = np.empty_like(flat_w)
    if flat_w.size:
        k.soft_threshold_groups(flat_w, flat_keep, m, w.dtype.type(beta), w.dtype.type(0), out)
    return np.ascontiguousarray(np.moveaxis(out.reshape(moved_shape), -1, axis))


def soft_threshold(w: np.ndarray, n: int, m: int, axis: int = -1, *, beta: float = 1.0):
    """beta * S(w) of S-STE (module docstring) and the N:M mask it keeps.

    Parameters
    ----------
    w : float32 or float64 ndarray, any shape with ``w.shape[axis]`` divisible by m
    n, m : int, 1 <= n <= m
    axis : int
        The axis the groups of m run along (default: last).
    beta : float
        The scale (finite).

    Returns
    -------
    (ndarray like w, bool ndarray of w's shape)
        beta * S(w), and the mask (exactly n True per group; ties keep the lower index).

    Raises
    ------
    TypeError / ValueError
        A dtype other than float32/float64, N > M, an axis M does not tile, NaN in w, a
        non-finite beta.
    """
    from stepsim.core.masks import nm_mask

    check_float_array("w", w, dtypes=SOFT_DTYPES)
    check_real("beta", beta)
    mask = nm_mask(w, n, m, axis)  # validates n, m, axis and NaN
    axis = axis % w.ndim
    return soft_from_mask(w, mask, m, axis, beta), mask


def sste_beta(w: np.ndarray, s: np.ndarray) -> float:
    """S-STE's scale beta = <w, S(w)> / <S(w), S(w)> (its weight rescaling), summed in
    float64 in index order (the same bits on every CPU). 1.0 when S(w) is all zero (nothing
    to rescale).

    Parameters
    ----------
    w, s : ndarrays of one shape and float dtype (s = S(w) with beta 1)

    Returns
    -------
    float
    """
    from stepsim._ground.validate import check_same_layout
    from stepsim.core import _soft_kernels as k

    check_float_array("w", w, dtypes=SOFT_DTYPES)
    check_same_layout("w", w, s=s)
    num, den = k.beta_sums(np.ascontiguousarray(w).reshape(-1),
                           np.ascontiguousarray(s).reshape(-1))
    return float(num / den) if den > 0.0 else 1.0
