"""Plain NumPy references: slow, obviously correct, and the oracle for every kernel.

Each numba kernel in stepsim has its reference here; property tests check that the two
agree across shapes, dtypes and N:M ratios, and ``stepsim bench`` times the vectorised
ones as the "NumPy" baseline. Functions here do not validate their arguments (the public
wrappers in :mod:`stepsim.core.masks` and :mod:`stepsim.core.optim` do).
"""

from __future__ import annotations

import numpy as np

from stepsim._ground import libm as _libm


def nm_mask_groups(groups: np.ndarray, n: int) -> np.ndarray:
    """Boolean mask keeping the ``n`` largest ``|x|`` of each row of ``groups``.

    groups: (G, M) array, one group per row. Ties keep the lower index: a stable sort of
    ``-|x|`` puts equal magnitudes in index order, so the first ``n`` are the kept ones.
    Returns a bool array of shape (G, M).
    """
    order = np.argsort(-np.abs(groups), axis=1, kind="stable")
    mask = np.zeros(groups.shape, dtype=bool)
    np.put_along_axis(mask, order[:, :n], True, axis=1)
    return mask


def nm_mask(w: np.ndarray, n: int, m: int, axis: int = -1) -> np.ndarray:
    """N:M mask of ``w`` along ``axis`` (groups of ``m`` consecutive entries), as bool."""
    moved = np.moveaxis(w, axis, -1)
    groups = moved.reshape(-1, m)
    mask = nm_mask_groups(groups, n).reshape(moved.shape)
    return np.moveaxis(mask, -1, axis)


def adam_step(w, g, m, v, *, step, lr, beta1, beta2, eps, eps_mode="inside",
              weight_decay=0.0, freeze_v=False, bias_correction2=None):
    """One Adam(W) step in place, as stepsim counts steps (SPEC section 1).

    All arrays share one float dtype; scalars are cast to it first, so the arithmetic is
    the dtype's own (the numba kernel performs exactly these operations in this order).
    ``bias_correction2`` is the divisor of v (default ``1 - beta2**step``; 1.0 = raw v).
    Returns the v of the previous step (a copy) so callers can form statistics.
    """
    dt = w.dtype.type
    bc1 = 1.0 - beta1**step
    bc2 = (1.0 - beta2**step) if bias_correction2 is None else bias_correction2
    b1, b2 = dt(beta1), dt(beta2)
    v_prev = v.copy()
    if weight_decay:
        w *= dt(1.0 - lr * weight_decay)
    m *= b1
    m += dt(1.0 - beta1) * g
    if not freeze_v:
        v *= b2
        v += dt(1.0 - beta2) * (g * g)
    mhat = m * dt(1.0 / bc1)
    vhat = v * dt(1.0 / bc2)
    if eps_mode == "inside":
        denom = np.sqrt(vhat + dt(eps))
    else:
        denom = np.sqrt(vhat) + dt(eps)
    w -= dt(lr) * (mhat / denom)
    return v_prev


def adam_stats(v_prev, v, *, scale_prev=1.0, scale_new=1.0):
    """Statistics of a v update, in float64: what the fused kernel reduces in its pass.

    Differences are of ``scale_new * v - scale_prev * v_prev`` (scales 1 for raw v; the
    inverse bias corrections for vhat). Returns a dict with ``dv_l1``, ``dv_log_sum`` (sum
    of log|dv| over the non-zero differences), ``dv_zeros``, ``v_l1`` and ``v_l2sq``, the
    norms being of ``scale_new * v``.
    """
    vn = v.astype(np.float64) * scale_new
    vp = v_prev.astype(np.float64) * scale_prev
    dv = np.abs(vn - vp)
    nz = dv != 0
    return {
        "dv_l1": float(dv.sum()),
        "dv_log_sum": float(_libm.log(dv[nz]).sum()),
        "dv_zeros": int((~nz).sum()),
        "v_l1": float(np.abs(vn).sum()),
        "v_l2sq": float((vn * vn).sum()),
    }


def sgdm_step(w, g, buf, *, lr, momentum, weight_decay=0.0, nesterov=False):
    """One momentum-SGD step in place (PyTorch's convention, no dampening).

    d = g + weight_decay * w (coupled L2); buf = momentum * buf + d;
    w -= lr * (d + momentum * buf if nesterov else buf). With buf starting at zeros the
    first step gives buf = d, exactly as torch.optim.SGD does.
    """
    dt = w.dtype.type
    d = g + dt(weight_decay) * w if weight_decay else g.copy()
    buf *= dt(momentum)
    buf += d
    update = d + dt(momentum) * buf if nesterov else buf
    w -= dt(lr) * update


def soft_threshold_groups(groups: np.ndarray, keep: np.ndarray, beta: float) -> np.ndarray:
    """beta * S(w) of S-STE for (G, M) ``groups`` with their bool N:M mask ``keep``.

    t = the largest |w| among each group's pruned entries (0 if none); kept entries give
    copysign(|w| - t, w), pruned ones 0, all times beta, in w's dtype (the kernel's order).
    """
    dt = groups.dtype.type
    a = np.abs(groups)
    t = np.where(keep, dt(0), a).max(axis=1, keepdims=True) if groups.size else a
    s = np.where(keep, np.copysign(a - t, groups), dt(0))
    return dt(beta) * s


def sste_beta_sums(w: np.ndarray, s: np.ndarray) -> tuple[float, float]:
    """(sum w*s, sum s*s) in float64, accumulated in index order (cumsum is sequential)."""
    w64 = w.reshape(-1).astype(np.float64)
    s64 = s.reshape(-1).astype(np.float64)
    if not w64.size:
        return 0.0, 0.0
    return float(np.cumsum(w64 * s64)[-1]), float(np.cumsum(s64 * s64)[-1])


def transposable_24_brute(w: np.ndarray) -> np.ndarray:
    """Transposable 2:4 mask of a 2-D ``w`` by brute force: in every 4x4 block, every subset
    of 8 of the 16 entries (itertools order, i.e. lexicographic) with 2 per row and 2 per
    column is scored by the float64 sum of its |w| in index order; the first best is kept."""
    import itertools

    valid = [combo for combo in itertools.combinations(range(16), 8)
             if all(sum(1 for i in combo if i // 4 == r) == 2 for r in range(4))
             and all(sum(1 for i in combo if i % 4 == c) == 2 for c in range(4))]
    out = np.zeros(w.shape, dtype=bool)
    for bi in range(0, w.shape[0], 4):
        for bj in range(0, w.shape[1], 4):
            a = [abs(float(x)) for x in w[bi:bi + 4, bj:bj + 4].reshape(-1)]
            best, best_score = None, -1.0
            for combo in valid:
                score = 0.0
                for i in combo:
                    score += a[i]
                if score > best_score:
                    best, best_score = combo, score
            for i in best:
                out[bi + i // 4, bj + i % 4] = True
    return out
