"""numba kernels of Statement B'+ (``sticky.py``, private; its wrappers validate).

``grid_kernel`` (what the bound uses, O(n M) per exponent) brackets log E exp(lam D) by the
trapezoid and midpoint rules (see its docstring and ``sticky.py``). ``log_mgf_kernel``
(O(n^2), the check of the bracket) returns log E exp(lam D) (not centred) for each lam,
D = sum_j w_j G u_j, u the stationary sticky chain, by the exact O(k^2) backward recursion
of ``sticky.py``'s docstring, in log space:

    log I_k = LSE_{m = k..n} [ (m - k) log r + logc_m + log phi(x_km) ],
    x_km = G (P_m - P_{k-1}),  P the prefix sums of a = lam w,  r = 1 - q,
    logc_m = log q + log I_{m+1} (m < n),  logc_n = 0.

log phi(x) = max(x, 0) + log(-expm1(-|x|) / |x|) (0 at x = 0): each term is
exp(U - top) * (-expm1(-|x|) / |x|) with U = (m - k) log r + logc_m + max(x, 0) and top
the largest U of row k (found in a first pass that needs no exp), so nothing overflows;
the row sum is >= the term of the largest U times its ratio > 0, so it never underflows
to 0 either. math.exp / math.log / math.expm1 are libm, as in ``_ground.libm_kernels``.
"""

from __future__ import annotations

import math

import numpy as np

from stepsim._ground.jit import njit


@njit
def log_mgf_kernel(w, lams, q, G):
    n = w.size
    out = np.empty(lams.size)
    logr = math.log(1.0 - q) if q < 1.0 else -math.inf
    logq = math.log(q)
    P = np.empty(n + 1)
    logc = np.empty(n)
    for li in range(lams.size):
        lam = lams[li]
        P[0] = 0.0
        for j in range(n):
            P[j + 1] = P[j] + lam * w[j]
        logc[n - 1] = 0.0
        logI = 0.0
        for k in range(n - 1, -1, -1):  # row k (0-based): runs starting at step k+1
            last = n - 1 if q < 1.0 else k  # q = 1: only the run of length 1 survives
            base = G * P[k]
            top = -math.inf
            for m in range(k, last + 1):
                x = G * P[m + 1] - base
                run = 0.0 if m == k else (m - k) * logr  # 0 * log 0 is no term: r^0 = 1
                u = run + logc[m] + max(0.0, x)
                top = max(top, u)
            s = 0.0
            for m in range(k, last + 1):
                x = G * P[m + 1] - base
                ax = abs(x)
                ratio = 1.0 if ax == 0.0 else -math.expm1(-ax) / ax
                run = 0.0 if m == k else (m - k) * logr
                u = run + logc[m] + max(0.0, x)
                s += math.exp(u - top) * ratio
            logI = top + math.log(s)
            if k > 0:
                logc[k - 1] = logq + logI
        out[li] = logI
    return out


#: exp is evaluated exactly every ANCHOR nodes; the nodes between are reached by products
ANCHOR = 32


@njit
def grid_kernel(w, lams, q, G, M, upper):
    """Bracket of log E exp(lam D) for each lam on M intervals of [0, G] (``sticky.py``):
    upper=True: nodes y_i = G i / M, trapezoid (an upper bound: F is convex); False: nodes
    G (i + 1/2) / M, midpoint rule (a lower bound). f holds F_k at the nodes divided by its
    rule's integral (so it stays O(M)); the logs of those integrals are summed. Raw log,
    without the rounding allowance (``sticky._allowance``)."""
    n = w.size
    out = np.empty(lams.size)
    r = 1.0 - q
    nodes = M + 1 if upper else M
    off = 0.0 if upper else 0.5
    f = np.empty(nodes)
    for li in range(lams.size):
        lam = lams[li]
        for i in range(nodes):
            f[i] = 1.0  # F_{n+1} = 1, its integral 1
        acc = 0.0
        for k in range(n - 1, -1, -1):
            step = lam * w[k] * G / M  # a_k times the node spacing
            # e^{a_k y} = e^{shift} e^{a_k y - shift}, shift its largest exponent over the
            # nodes (an end node): every factor is <= 1, so nothing overflows at any lam
            shift = max(step * off, step * (nodes - 1 + off))
            z = math.exp(step)
            total = 0.0
            for start in range(0, nodes, ANCHOR):  # exp exact at each block's first node
                e = math.exp(step * (start + off) - shift)
                for i in range(start, min(start + ANCHOR, nodes)):
                    v = e * (r * f[i] + q)
                    f[i] = v
                    e *= z
                    # trapezoid: half weight at both ends (added, never subtracted: every
                    # operation is on positive numbers, so relative rounding only adds up)
                    total += 0.5 * v if upper and (i == 0 or i == M) else v
            total /= M
            inv = 1.0 / total
            for i in range(nodes):
                f[i] *= inv
            acc += shift + math.log(total)
        out[li] = acc
    return out
