"""Theorem 1's bound and the closed forms beside it (SPEC section 5), for any process.

* :func:`theorem1_bound` — the paper's sqrt(4 G^2 (1 - b2)^2 n log(2 / delta)) at lag n;
* :func:`worst_case` — the largest |vhat_k - vhat_k0| any [0, G]-valued sequence reaches
  (the trivial bound);
* :func:`hoeffding_bound` — a valid bound when the g^2 are independent.

Powers by scalar ``pow`` (:func:`_pow`): the same bits on every CPU. Read by the check
(:mod:`.check`), the corrected bounds (:mod:`.bounds`, :mod:`.corrected`) and their
verification (:mod:`.verify`).
"""

from __future__ import annotations

import math

import numpy as np


def theorem1_bound(G: float, beta2: float, lags, delta: float) -> np.ndarray:
    """The paper's bound sqrt(4 G^2 (1-b2)^2 n log(2/delta)) at each lag n (float64)."""
    n = np.asarray(lags, dtype=np.float64)
    return np.sqrt(4.0 * G * G * (1.0 - beta2) ** 2 * n * math.log(2.0 / delta))


def _pow(base: float, exponents) -> np.ndarray:
    """base ** e for each e, by ``math.pow`` one element at a time (float64 array).

    Why not ``base ** array``: NumPy's vectorised power has CPU-specific SIMD paths
    (AVX-512 among them) that differ from the scalar libm ``pow`` in the last bit, so the
    analytic columns of a committed result would depend on the CPU that made them.
    ``math.pow`` is the platform's scalar ``pow``, the same on every x86-64 CPU; the
    remaining operations here (+, -, *, /, sqrt) are correctly rounded by IEEE 754.
    """
    return np.array([math.pow(base, float(e)) for e in np.asarray(exponents).ravel()],
                    dtype=np.float64).reshape(np.shape(exponents))


def worst_case(G: float, beta2: float, k0: int, lags) -> np.ndarray:
    """sup |vhat_{k0+n} - vhat_k0| over ALL sequences g_j^2 in [0, G]: G (1-b2^n)/(1-b2^k).

    vhat_k - vhat_k0 = sum_j w_j g_j^2 with sum_j w_j = 0 and positive weight
    (1-b2^n)/(1-b2^k) on the steps after k0. Where this is below the bound, no process
    whatever (stationary or not) can violate the theorem at that lag. Computed in a fixed
    order with scalar ``pow`` (:func:`_pow`): the same bits on every CPU.
    """
    n = np.asarray(lags, dtype=np.float64)
    return G * (1.0 - _pow(beta2, n)) / (1.0 - _pow(beta2, k0 + n))


def hoeffding_bound(G: float, beta2: float, k0: int, lags, delta: float) -> np.ndarray:
    """A valid (1 - delta) bound when the g_j^2 are INDEPENDENT in [0, G] with equal means.

    Hoeffding for the weighted sum sum_j w_j (g_j^2 - mu): G sqrt(S log(2/delta) / 2) with
    S = sum_j w_j^2 = (1-b2)^2/(1-b2^2) [(1-b2^{2n})/(1-b2^k)^2 + (1-b2^{2 k0}) D^2],
    D = (1-b2^n) / ((1-b2^k0)(1-b2^k)). For k0 past the statement's condition
    S <= 6 (1-b2)^2 n, so this never exceeds the paper's bound (see paper_checks/theorem1.md).
    Powers by scalar ``pow`` (:func:`_pow`): the same bits on every CPU.
    """
    n = np.asarray(lags, dtype=np.float64)
    b = beta2
    k = k0 + n
    b_n, b_k, b_2n = _pow(b, n), _pow(b, k), _pow(b, 2 * n)
    b_k0, b_2k0 = math.pow(b, k0), math.pow(b, 2 * k0)
    d = (1.0 - b_n) / ((1.0 - b_k0) * (1.0 - b_k))
    s = (1.0 - b) ** 2 / (1.0 - b * b) * ((1.0 - b_2n) / ((1.0 - b_k) * (1.0 - b_k))
                                         + (1.0 - b_2k0) * d * d)
    return G * np.sqrt(s * math.log(2.0 / delta) / 2.0)
