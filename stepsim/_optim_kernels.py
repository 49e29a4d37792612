"""numba kernels for Adam(W) and momentum SGD. Private: call :mod:`stepsim.optim`.

Each kernel makes one pass over memory and updates in place. Adam also reduces the
statistics the switch criteria need in that pass. To keep both halves vectorised it
works in blocks of ``BLOCK`` elements: a strict element-wise loop updates a block (and
keeps the block's old v in a small L1-resident scratch array), then a reduction helper,
allowed to reassociate, sums the block's statistics in float64 while it is still in
cache. Per-block sums go to ``partial`` and the wrapper adds them in block order, so the
statistics do not depend on the number of threads.

All scalar arguments arrive already in the arrays' dtype (a Python float would silently
turn a float32 loop into float64), and the element-wise arithmetic is written in the
order of :func:`stepsim.reference.adam_step`, so results agree bit for bit with it.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from stepsim._jit import njit

BLOCK = 4096  # elements a block: 4 arrays x 16 KiB stay in L1/L2 while reduced
N_STATS = 5  # dv_l1, dv_log_sum, dv_zeros, v_l1, v_l2sq


@njit
def _adam_block(w, g, g_bits, abs_mask, m, v, v_old, keep_old, b1, c1, b2, c2, inv_bc1, inv_bc2,
                eps_in, eps_out, lr, decay):
    """Adam on one block; v_old receives v before the update if keep_old (for statistics).

    Returns the largest |g| bit pattern (g_bits: g viewed as unsigned integers): above the
    infinity pattern iff the block holds a non-finite g. An integer max vectorises in a
    strict loop, where a float sum would not.
    """
    largest = g_bits[0] & abs_mask
    for i in range(w.shape[0]):
        largest = max(largest, g_bits[i] & abs_mask)
        gi = g[i]
        vo = v[i]
        if keep_old:  # loop-invariant: compiled as two loops
            v_old[i] = vo
        mi = b1 * m[i] + c1 * gi
        m[i] = mi
        vi = b2 * vo + c2 * (gi * gi)
        v[i] = vi
        w[i] = w[i] * decay - lr * ((mi * inv_bc1) / (np.sqrt(vi * inv_bc2 + eps_in) + eps_out))
    return largest


@njit
def _adam_block_frozen_v(w, g, g_bits, abs_mask, m, v, b1, c1, inv_bc1, inv_bc2, eps_in, eps_out,
                         lr, decay):
    """Adam on one block with v read, never written (STEP phase 2); returns as _adam_block."""
    largest = g_bits[0] & abs_mask
    for i in range(w.shape[0]):
        largest = max(largest, g_bits[i] & abs_mask)
        mi = b1 * m[i] + c1 * g[i]
        m[i] = mi
        w[i] = w[i] * decay - lr * ((mi * inv_bc1) / (np.sqrt(v[i] * inv_bc2 + eps_in) + eps_out))
    return largest


@njit(reduction=True)
def _block_stats(v, v_old, scale_prev, scale_new, log_stats, out):
    """Float64 statistics of dv = scale_new*v - scale_prev*v_old over one block, into out.

    The count of zeros is kept as a float64 sum (exact below 2**53) because integer and
    float lanes mix poorly in one vectorised loop.
    """
    dv_l1 = 0.0
    v_l1 = 0.0
    v_l2sq = 0.0
    zeros = 0.0
    raw = scale_prev == 1.0 and scale_new == 1.0  # loop-invariant: the branch is hoisted
    for i in range(v.shape[0]):
        vn = np.float64(v[i])
        vo = np.float64(v_old[i])
        if not raw:
            vn *= scale_new
            vo *= scale_prev
        d = abs(vn - vo)
        dv_l1 += d
        v_l1 += vn
        v_l2sq += vn * vn
        zeros += 1.0 if d == 0.0 else 0.0
    dv_log = 0.0
    if log_stats:
        for i in range(v.shape[0]):
            d = abs(np.float64(v[i]) * scale_new - np.float64(v_old[i]) * scale_prev)
            if d != 0.0:
                dv_log += np.log(d)
    out[0] = dv_l1
    out[1] = dv_log
    out[2] = zeros
    out[3] = v_l1
    out[4] = v_l2sq


@njit(parallel=True)
def adam(w, g, g_bits, abs_mask, m, v, b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in, eps_out, lr,
         decay, freeze_v, with_stats, log_stats, scale_prev, scale_new, g_largest, partial,
         scratch):
    """One Adam(W) step over flat arrays w, g, m, v (same dtype), in place.

    m = b1*m + c1*g; v = b2*v + c2*g*g (skipped if freeze_v);
    w = w*decay - lr * (m*inv_bc1) / (sqrt(v*inv_bc2 + eps_in) + eps_out).
    g_bits: g viewed as unsigned integers; g_largest (blocks,) receives each block's largest
    |g| bit pattern (the wrapper compares it with infinity's).
    partial (blocks, N_STATS) float64, if with_stats, receives each block's statistics of
    dv = scale_new*v_new - scale_prev*v_old: sum|dv|, sum log|dv| over dv != 0 (0 unless
    log_stats), count of dv == 0, sum scale_new*v_new, sum (scale_new*v_new)^2.
    scratch (tasks, BLOCK): one row per parallel task for the old v of its current block.
    Each task walks its own contiguous run of blocks (an allocation per block cost ~10% of
    a step at 2^24, and asking numba for a thread id would make the kernel uncacheable).
    """
    n = w.shape[0]
    blocks = g_largest.shape[0]
    tasks = scratch.shape[0]
    per_task = (blocks + tasks - 1) // tasks
    for t in prange(tasks):
        for b in range(t * per_task, min((t + 1) * per_task, blocks)):
            lo = b * BLOCK
            hi = min(lo + BLOCK, n)
            vb = v[lo:hi]
            if freeze_v:
                g_largest[b] = _adam_block_frozen_v(w[lo:hi], g[lo:hi], g_bits[lo:hi], abs_mask,
                                                    m[lo:hi], vb, b1, c1, inv_bc1, inv_bc2,
                                                    eps_in, eps_out, lr, decay)
                v_old = vb
            else:
                v_old = scratch[t, : hi - lo]
                g_largest[b] = _adam_block(w[lo:hi], g[lo:hi], g_bits[lo:hi], abs_mask,
                                           m[lo:hi], vb, v_old, with_stats, b1, c1, b2, c2,
                                           inv_bc1, inv_bc2, eps_in, eps_out, lr, decay)
            if with_stats:
                _block_stats(vb, v_old, scale_prev, scale_new, log_stats, partial[b])


@njit
def _sgdm_block(w, g, buf, lr, momentum, weight_decay, nesterov):
    bad_g = 0
    for i in range(w.shape[0]):
        gi = g[i]
        d = gi + weight_decay * w[i]
        b = momentum * buf[i] + d
        buf[i] = b
        w[i] = w[i] - lr * ((d + momentum * b) if nesterov else b)
        bad_g += not np.isfinite(gi)
    return bad_g


@njit(parallel=True)
def sgdm(w, g, buf, lr, momentum, weight_decay, nesterov):
    """One momentum-SGD step over flat arrays, in place (PyTorch's rule, no dampening).

    d = g + weight_decay*w; buf = momentum*buf + d; w -= lr*(nesterov ? d + momentum*buf : buf).
    Returns the count of non-finite g.
    """
    n = w.shape[0]
    bad_g = 0
    for b in prange((n + BLOCK - 1) // BLOCK):
        lo = b * BLOCK
        hi = min(lo + BLOCK, n)
        bad_g += _sgdm_block(w[lo:hi], g[lo:hi], buf[lo:hi], lr, momentum, weight_decay,
                             nesterov)
    return bad_g
