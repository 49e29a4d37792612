"""numba kernels for S-STE's soft threshold. Private: call :mod:`stepsim.core.soft`.

References: :func:`stepsim.core.reference.soft_threshold_groups` and
:func:`stepsim.core.reference.sste_beta_sums`; the property tests check bit equality.
"""

from __future__ import annotations

import numpy as np

from stepsim._ground.jit import njit


@njit
def soft_threshold_groups(w, keep, m, beta, zero, out):
    """beta * S(w) over flat groups of ``m`` (S-STE, Hu et al. 2024).

    w: (G*m,) float32/float64; keep: (G*m,) uint8, the N:M mask (1 = kept); beta, zero:
    scalars of w's dtype (zero = 0); out: (G*m,) like w, written. Per group t = the
    largest |w| among the pruned entries (the (N+1)-th largest |w|; 0 when nothing is
    pruned); a kept entry becomes beta * copysign(|w| - t, w), a pruned one 0.
    """
    for g in range(w.shape[0] // m):
        lo = g * m
        t = zero
        for i in range(lo, lo + m):
            if keep[i] == 0:
                a = abs(w[i])
                t = max(t, a)
        for i in range(lo, lo + m):
            if keep[i] != 0:
                out[i] = beta * np.copysign(abs(w[i]) - t, w[i])
            else:
                out[i] = 0


@njit
def beta_sums(w, s):
    """(sum w*s, sum s*s) in float64, one pass in index order (a fixed order, so the
    same bits on every CPU): the numerator and denominator of S-STE's beta."""
    num = 0.0
    den = 0.0
    for i in range(w.shape[0]):
        x = np.float64(w[i])
        y = np.float64(s[i])
        num += x * y
        den += y * y
    return num, den
