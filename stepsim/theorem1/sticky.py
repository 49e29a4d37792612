"""Statement B'+: the m.g.f. of D for the sticky chain, and its Chernoff bound.

The built-in ``sticky`` chain (``chains.Sticky``) draws g_j^2 = Y_j = G u_j with
u_j = u_{j-1} with probability r = 1 - q and a fresh U[0, 1] otherwise, started from its
stationary law U[0, 1]. Its state is continuous, so B+'s transfer matrices do not apply.
D = sum_j w_j Y_j (j = 1..n, weights of any sign), a_j = lam w_j, and
F_k(y) = E[exp(sum_{j>=k} a_j Y_j) | Y_k = y] (F_{n+1} = 1), I_k = E_{u~U} F_k(G u):

* **Recursion**: the kernel gives F_k(y) = e^{a_k y} [r F_{k+1}(y) + q I_{k+1}], and the
  stationary start gives E exp(lam D) = I_1 exactly.
* **Exact, O(n^2)** (``log_mgf_exact``): unrolled, F_k(y) = sum_{m=k}^{n} r^{m-k} c_m
  e^{S_km y}, S_km = a_k + ... + a_m, c_m = q I_{m+1} (m < n), c_n = 1, so
  I_k = sum_m r^{m-k} c_m phi(G S_km), phi(s) = E e^{sU} = expm1(s)/s. Too slow for the
  verification's n ~ 11,000 steps (n^2 / 2 exp pairs per exponent); it checks the bracket.
* **Bracket, O(n M)** (``log_mgf_bracket``, what the bound uses): every F_k is a positive
  combination of exponentials in y, hence convex. On M intervals of [0, G], the trapezoid
  rule T over-estimates and the midpoint rule under-estimates the mean of a convex
  function. Run the recursion with I_{k+1} replaced by Ibar_{k+1} = T(Fbar_{k+1}):
  Fbar_k = e^{a_k y} [r Fbar_{k+1} + q Ibar_{k+1}] is again a positive combination of
  exponentials (convex), Fbar_k >= F_k by induction (Ibar_{k+1} >= E Fbar_{k+1}(GU) >=
  I_{k+1}), and Fbar_k is needed only at the nodes, where it is computed exactly. So
  Ibar_1 >= E exp(lam D); the midpoint version gives a lower bound the same way. Rounding:
  all arithmetic is on positive numbers (no cancellation), at most n (M + ANCHOR + 8)
  roundings deep; each e^{a_k y} is scaled by e^{-max over the nodes of a_k y} (no
  overflow at any lam, the shift added back in the log); ``_allowance`` bounds the
  rounding of the log (~3e-9 at n = 11,228, plus the exponents' rounding and underflow)
  and is added to the upper end (subtracted from the lower).
  The gap upper - lower is the price of the grid (measured in §5.13: <= 1e-6 in the log at
  the exponents that decide the bound).

The bound is B+'s: Markov's inequality on exp(lam D) at every lam of a fixed grid
(``chernoff.lam_grid``, every ``STRIDE``-th point), both tails, L = log(2 d / delta), the
smallest radius rounded up (``chernoff.chernoff_radius``) with the upper end of the bracket
as psi; |E D| is added (E D = G sum(w) / 2, 0 up to rounding for the Theorem 1 weights).
Proof and checks: paper_checks/theorem1.md §5.13.

Assumptions: g^2 = G u_j with u the sticky chain above, stationary (u_1 ~ U[0, 1]),
0 < q <= 1 (q = 1: i.i.d. uniform), coordinates in any dependence (the union bound over d
needs none). No spectral-gap inequality, no truncation. Units: D and the bound in units of
g^2 (G).
"""

from __future__ import annotations

import math

import numpy as np

from stepsim._ground import libm as _libm
from stepsim.theorem1.chernoff import log_phi

#: every STRIDE-th exponent of ``chernoff.lam_grid`` is tried (each one gives a valid bound)
STRIDE = 3
#: intervals of [0, G] of the bracket's quadrature rules
NODES = 1024


def _check(w, lams, q, G) -> tuple[np.ndarray, np.ndarray, float, float]:
    try:
        q = float(q)
    except (TypeError, ValueError):
        raise ValueError(f"q must be a number in (0, 1], got {q!r}") from None
    if not 0.0 < q <= 1.0:
        raise ValueError(f"q must be in (0, 1], got {q!r}")
    try:
        G = float(G)
    except (TypeError, ValueError):
        raise ValueError(f"G must be a finite number > 0, got {G!r}") from None
    if not (math.isfinite(G) and G > 0.0):
        raise ValueError(f"G must be a finite number > 0, got {G!r}")
    w = np.ascontiguousarray(np.asarray(w, dtype=np.float64).ravel())
    if w.size == 0 or not np.all(np.isfinite(w)):
        raise ValueError(f"w must be a non-empty array of finite weights, got {w.size} "
                         "entries" + ("" if w.size == 0 else " with a non-finite one"))
    lams = np.ascontiguousarray(np.asarray(lams, dtype=np.float64).ravel())
    if not np.all(np.isfinite(lams)):
        raise ValueError("lams must be finite")
    return w, lams, q, G


def _centre(out, lams, w, G, centred):
    return out - lams * (0.5 * G * float(np.sum(w))) if centred else out


def _allowance(w: np.ndarray, lams: np.ndarray, q: float, G: float,
               nodes: int) -> np.ndarray:
    """Bound on the rounding of the bracket kernel's log, per exponent (module docstring):
    2 n (M + ANCHOR + 8) 2^-53 for the chains of products and sums of positive numbers,
    8 |lam| G sum|w| 2^-53 for the rounding of the exponents handed to exp, and
    n 4 M^2 2^-1022 / q for factors that underflow to 0 (each < 2^-1022, against a total
    >= q / (2 M) from the node whose factor is 1)."""
    from stepsim.theorem1._sticky_kernel import ANCHOR

    n = w.size
    u = 2.0 ** -53
    return (2.0 * n * (nodes + ANCHOR + 8) * u
            + 8.0 * np.abs(lams) * G * float(np.sum(np.abs(w))) * u
            + n * 4.0 * nodes * nodes * 2.0 ** -1022 / q)


def _check_nodes(nodes) -> int:
    if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or nodes < 1:
        raise ValueError(f"nodes must be an integer >= 1, got {nodes!r}")
    return int(nodes)


def log_mgf_bracket(w, lams, *, q: float, G: float = 1.0, nodes: int = NODES,
                    centred: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) with lower <= log E exp(lam D) [- lam E D] <= upper for each lam.

    w: (n,) weights (any signs); lams: (L,) exponents (either sign); 0 < q <= 1; G > 0;
    nodes: intervals of [0, G] (the gap shrinks like nodes^-2). O(n nodes) per exponent.
    The rounding allowance is included (upper raised, lower lowered)."""
    w, lams, q, G = _check(w, lams, q, G)
    nodes = _check_nodes(nodes)
    from stepsim.theorem1._sticky_kernel import grid_kernel

    eps = _allowance(w, lams, q, G, nodes)
    up = grid_kernel(w, lams, q, G, nodes, True) + eps
    lo = grid_kernel(w, lams, q, G, nodes, False) - eps
    return _centre(lo, lams, w, G, centred), _centre(up, lams, w, G, centred)


def log_mgf(w, lams, *, q: float, G: float = 1.0, nodes: int = NODES) -> np.ndarray:
    """Upper bound on psi(lam) = log E exp(lam D) - lam E D: the upper end of
    ``log_mgf_bracket`` (trapezoid rule, rounding allowance included), computed alone."""
    w, lams, q, G = _check(w, lams, q, G)
    nodes = _check_nodes(nodes)
    from stepsim.theorem1._sticky_kernel import grid_kernel

    up = grid_kernel(w, lams, q, G, nodes, True) + _allowance(w, lams, q, G, nodes)
    return _centre(up, lams, w, G, True)


def log_mgf_bracket_reference(w, lams, *, q: float, G: float = 1.0, nodes: int = NODES,
                              upper: bool = True) -> np.ndarray:
    """NumPy reference of ``grid_kernel`` (raw log, no allowance; exp at every node)."""
    w, lams, q, G = _check(w, lams, q, G)
    nodes = _check_nodes(nodes)
    y = (np.arange(nodes + 1.0) if upper else np.arange(nodes) + 0.5) * (G / nodes)
    rule = np.ones(y.size)
    if upper:
        rule[0] = rule[-1] = 0.5
    out = np.empty(lams.size)
    for i, lam in enumerate(lams):
        f, acc = np.ones(y.size), 0.0
        for k in range(w.size - 1, -1, -1):
            f = _libm.exp(lam * w[k] * y) * ((1.0 - q) * f + q)
            total = float(np.sum(rule * f)) / nodes
            f = f / total
            acc += _libm.log(total)
        out[i] = acc
    return out


def log_mgf_exact(w, lams, *, q: float, G: float = 1.0, centred: bool = True) -> np.ndarray:
    """log E exp(lam D) (- lam E D if centred), exact up to rounding: the O(n^2) unrolled
    recursion (numba, log-sum-exp per row). (L,) float64."""
    w, lams, q, G = _check(w, lams, q, G)
    from stepsim.theorem1._sticky_kernel import log_mgf_kernel

    return _centre(log_mgf_kernel(w, lams, q, G), lams, w, G, centred)


def log_mgf_exact_reference(w, lams, *, q: float, G: float = 1.0,
                            centred: bool = True) -> np.ndarray:
    """NumPy reference of ``log_mgf_exact`` (same recursion, rows vectorised; small n)."""
    w, lams, q, G = _check(w, lams, q, G)
    n = w.size
    out = np.empty(lams.size)
    logr = _libm.log(1.0 - q) if q < 1.0 else -math.inf
    for i, lam in enumerate(lams):
        P = np.concatenate([[0.0], np.cumsum(lam * w)])
        logc = np.zeros(n)
        logI = 0.0
        for k in range(n - 1, -1, -1):
            m = np.arange(k, n) if q < 1.0 else np.array([k])
            runs = np.array([0.0 if j == k else (j - k) * logr for j in m])
            terms = runs + logc[m] + log_phi(G * P[m + 1] - G * P[k])
            top = float(np.max(terms))
            logI = top + _libm.log(float(np.sum(_libm.exp(terms - top))))
            if k > 0:
                logc[k - 1] = _libm.log(q) + logI
        out[i] = logI
    return _centre(out, lams, w, G, centred)


def log_mgf_runs(w, lams, *, q: float, G: float = 1.0) -> np.ndarray:
    """Brute force (tests, n <= ~12): E exp(lam D) as the sum over the 2^(n-1) keep/redraw
    patterns of steps 2..n of prob x prod over runs of phi(G x the run's sum of lam w_j)
    (the values of distinct runs are independent U[0, 1]); raw log, not centred."""
    w, lams, q, G = _check(w, lams, q, G)
    n = w.size
    out = np.empty(lams.size)
    for i, lam in enumerate(lams):
        total = 0.0
        for pattern in range(1 << (n - 1)):  # bit j-1 set: step j+1 keeps the value of j
            prob, value, run = 1.0, 1.0, lam * w[0]
            for j in range(1, n):
                if pattern >> (j - 1) & 1:
                    prob *= 1.0 - q
                    run += lam * w[j]
                else:
                    prob *= q
                    value *= _libm.exp(float(log_phi(G * run)))
                    run = lam * w[j]
            total += prob * value * _libm.exp(float(log_phi(G * run)))
        out[i] = _libm.log(total)
    return out


def applies(process) -> bool:
    """True for the built-in stationary ``sticky`` chain (``chains.Sticky``)."""
    return (getattr(process, "name", None) == "sticky"
            and getattr(process, "stationary", None) is True
            and isinstance(getattr(process, "params", None), dict) and "q" in process.params)


__all__ = ["NODES", "STRIDE", "applies", "log_mgf", "log_mgf_bracket",
           "log_mgf_bracket_reference", "log_mgf_exact", "log_mgf_exact_reference",
           "log_mgf_runs"]
