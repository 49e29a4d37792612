"""numba kernels for Adam(W) and momentum SGD. Private: call :mod:`stepsim.optim`.

Each kernel makes one pass over memory, updates in place, and reduces the statistics the
switch criteria need in the same pass (float64 accumulators). All scalar arguments arrive
already in the arrays' dtype (a Python float would silently turn a float32 loop into
float64), and the element-wise arithmetic is written in the order of
:func:`stepsim.reference.adam_step`, so results agree bit for bit with it.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from stepsim._jit import njit


@njit(parallel=True)
def adam(w, g, m, v, b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in, eps_out, lr, decay,
         freeze_v, log_stats, scale_prev, scale_new):
    """One Adam(W) step over flat arrays w, g, m, v (same dtype), in place.

    m = b1*m + c1*g; v = b2*v + c2*g*g (skipped if freeze_v);
    w = w*decay - lr * (m*inv_bc1) / (sqrt(v*inv_bc2 + eps_in) + eps_out).
    Statistics of dv = scale_new*v_new - scale_prev*v_old (float64):
    returns (sum|dv|, sum log|dv| over dv != 0 [0 unless log_stats], count of dv == 0,
    sum |scale_new*v_new|, sum (scale_new*v_new)^2, count of non-finite g).
    """
    dv_l1 = 0.0
    dv_log = 0.0
    zeros = 0
    v_l1 = 0.0
    v_l2sq = 0.0
    bad_g = 0
    for i in prange(w.shape[0]):
        gi = g[i]
        mi = b1 * m[i] + c1 * gi
        m[i] = mi
        v_old = v[i]
        vi = v_old
        if not freeze_v:
            vi = b2 * v_old + c2 * (gi * gi)
            v[i] = vi
        w[i] = w[i] * decay - lr * ((mi * inv_bc1) / (np.sqrt(vi * inv_bc2 + eps_in) + eps_out))
        bad_g += not np.isfinite(gi)
        vn = np.float64(vi) * scale_new
        d = abs(vn - np.float64(v_old) * scale_prev)
        dv_l1 += d
        v_l1 += vn
        v_l2sq += vn * vn
        if d == 0.0:
            zeros += 1
        elif log_stats:
            dv_log += np.log(d)
    return dv_l1, dv_log, zeros, v_l1, v_l2sq, bad_g


@njit(parallel=True)
def sgdm(w, g, buf, lr, momentum, weight_decay, nesterov):
    """One momentum-SGD step over flat arrays, in place (PyTorch's rule, no dampening).

    d = g + weight_decay*w; buf = momentum*buf + d; w -= lr*(nesterov ? d + momentum*buf : buf).
    Returns the count of non-finite g.
    """
    bad_g = 0
    for i in prange(w.shape[0]):
        gi = g[i]
        d = gi + weight_decay * w[i]
        b = momentum * buf[i] + d
        buf[i] = b
        if nesterov:
            w[i] = w[i] - lr * (d + momentum * b)
        else:
            w[i] = w[i] - lr * b
        bad_g += not np.isfinite(gi)
    return bad_g
