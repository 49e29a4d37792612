"""Statement A'+: a Chernoff bound for g^2 = G Phi(x), x a stationary Gaussian AR(1).

The built-in ``ar1`` draws g_j^2 = G Phi(x_j), x_j = rho x_{j-1} + sqrt(1 - rho^2) z_j,
x ~ N(0, 1) stationary (|rho| < 1). The m.g.f. of D = sum_j w_j g_j^2 has no closed form, but
it has a closed-form UPPER bound: replace each Phi(x_j) by a quadratic in x_j that lies
above it (weight c_j = lam G w_j > 0) or below it (c_j < 0); then lam D <= x' Gam x + b' x +
const, a Gaussian quadratic form whose m.g.f. is exact (tridiagonal for AR(1)).

* **Majorant** (``majorant``): for a tangent point t > 0 and gamma >= gamma*(t),
  M_t(x) = Phi(t) + phi(t) (x - t) + gamma (x - t)^2 / 2 >= Phi(x) for every real x (on
  x >= t because Phi is concave on [0, inf); on x < t by the choice of gamma, computed on a
  grid with a margin that covers the points between grid nodes: ``majorant_curvature``).
  By Phi(x) = 1 - Phi(-x), m_t(x) = 1 - M_t(-x) <= Phi(x) (the minorant).
* **Quadratic form**: x ~ N(0, C), Gam diagonal, P = C^-1 - 2 Gam positive definite:
  E exp(x' Gam x + b' x) = (det C det P)^-1/2 exp(b' P^-1 b / 2). For C_ij = rho^|i-j|,
  (1 - rho^2) P = T0 - 2 (1 - rho^2) Gam =: T, T0 the tridiagonal with diagonal
  (1, 1 + rho^2, ..., 1 + rho^2, 1) and off-diagonal -rho (T0 = 1 - rho^2 if k = 1),
  det T0 = 1 - rho^2, so
  log E = -1/2 [log det T - log(1 - rho^2)] + (1 - rho^2) b' T^-1 b / 2, by one O(k) LDL'
  sweep whose pivots are all > 0 iff T is positive definite (else +inf: the exponent is
  not admissible).
* **Bound**: for every lam and t, psi(lam) = log E e^{lam D} - lam E D <= psibar_t(lam), so
  also <= min_t psibar_t(lam) (``log_mgf``), and Markov's inequality gives
  P(D - E D >= (psibar + L) / lam) <= e^{-L} (lam > 0; lam < 0 for the lower tail):
  ``chernoff.chernoff_radius`` on the fixed grid of exponents and the fixed tangent points
  ``TANGENTS``. Every (lam, t) is fixed before any sample is seen, so the minimum is one of
  them and is valid. Proof and checks: paper_checks/theorem1.md §5.11.

Assumptions: g^2 = G Phi(x_j) with x a stationary Gaussian AR(1), |rho| < 1 (any sign; no
monotonicity or spectral gap is used). Units: D and the bound in units of g^2 (G).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from stepsim._ground import libm as _libm

#: the tangent points t tried (each gives a valid bound; the smallest is kept per exponent)
TANGENTS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0)
#: grid spacing of the curvature search, and its left end (Phi(x) < 1e-300 below it)
_H, _X_LO = 2.5e-4, -40.0
#: |d/dx (Phi - M_t)| <= 2 phi(0) < 0.8 on [x_min, 0] (module docstring of majorant_curvature)
_SLOPE = 0.8
_PHI0 = 1.0 / math.sqrt(2.0 * math.pi)


def _Phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _phi(x: float) -> float:
    return _PHI0 * math.exp(-0.5 * x * x)


_erfc = np.frompyfunc(math.erfc, 1, 1)


def _check_t(t) -> float:
    t = float(t)
    if not (math.isfinite(t) and t > 0.0):
        raise ValueError(f"tangent point t must be a finite number > 0, got {t!r}")
    return t


@functools.lru_cache(maxsize=1)
def _phi_grid() -> tuple[np.ndarray, np.ndarray]:
    """The nodes x_i = -40 + i h on [-40, 0] and Phi(x_i) (libm erfc, one at a time)."""
    xs = _X_LO + _H * np.arange(round(-_X_LO / _H) + 1)
    return xs, 0.5 * _erfc(-xs / math.sqrt(2.0)).astype(np.float64)


@functools.lru_cache(maxsize=64)
def majorant_curvature(t: float) -> float:
    """gamma(t) >= gamma*(t) = sup_{x < t} 2 (Phi(x) - Phi(t) - phi(t)(x - t)) / (x - t)^2.

    Why it is an upper bound (so M_t >= Phi everywhere). Let x_m = t - phi(t)/gamma, the
    vertex of M_t. (i) x >= 0: Phi is concave there, Phi <= its tangent at t <= M_t.
    (ii) x < x_m: M_t decreases on (-inf, x_m], so M_t(x) >= M_t(x_m) >= Phi(x_m) >= Phi(x).
    (iii) x in [x_m, 0]: e = Phi - M_t has |e'| = |phi(x) - phi(t) - gamma (x - t)| <=
    phi(0) + gamma (t - x_m) = phi(0) + phi(t) <= 2 phi(0) < 0.8, so e <= 0 between grid
    nodes x_i (spacing h) if e(x_i) <= -0.4 h at every node. gamma is the largest
    2 (r(x_i) + 0.4 h) / (x_i - t)^2 over nodes x_i in [-40, 0] (r = Phi - tangent), and at
    least phi(t) / (t + 40) so that x_m >= -40 (the nodes cover [x_m, 0]).
    """
    t = _check_t(t)
    xs, Phi = _phi_grid()
    r = Phi - _Phi(t) - _phi(t) * (xs - t)
    need = 2.0 * (r + 0.5 * _SLOPE * _H) / (xs - t) ** 2
    return float(max(float(np.max(need)), _phi(t) / (t - _X_LO)))


def majorant(t: float) -> tuple[float, float, float]:
    """(A, B, gamma): M_t(x) = A + B x + gamma x^2 / 2 >= Phi(x) for all x (t > 0)."""
    t = _check_t(t)
    gam = majorant_curvature(t)
    return (_Phi(t) - t * _phi(t) + 0.5 * gam * t * t, _phi(t) - gam * t, gam)


def log_mgf(w: np.ndarray, lams: np.ndarray, *, rho: float, G: float = 1.0,
            tangents=TANGENTS) -> np.ndarray:
    """Upper bound on psi(lam) = log E exp(lam D) - lam E D, D = sum_j w_j G Phi(x_j).

    w: (k,) weights (any signs, k >= 1); lams: (n,) exponents (either sign); rho in (-1, 1);
    G > 0. Returns (n,): min over ``tangents`` of the exact log-m.g.f. of the quadratic
    majorant (module docstring), centred by lam E D = lam G sum(w) / 2; +inf where no
    tangent point gives a positive definite T.
    """
    w = np.asarray(w, dtype=np.float64).ravel()
    lams = np.asarray(lams, dtype=np.float64).ravel()
    rho = float(rho)
    if not -1.0 < rho < 1.0:
        raise ValueError(f"rho must be in (-1, 1), got {rho!r}")
    if not (math.isfinite(float(G)) and float(G) > 0.0):
        raise ValueError(f"G must be a finite number > 0, got {G!r}")
    if w.size == 0 or not np.all(np.isfinite(w)):
        raise ValueError("w must be a non-empty array of finite weights")
    if not np.all(np.isfinite(lams)):
        raise ValueError("lams must be finite")
    consts = np.array([majorant(t) for t in tangents])  # (nt, 3): A, B, gamma
    nt, n = len(consts), lams.size
    A = np.repeat(consts[:, 0], n)
    B = np.repeat(consts[:, 1], n)
    gam = np.repeat(consts[:, 2], n)
    lam = np.tile(lams, nt) * float(G)  # column = (tangent, exponent)
    one = 1.0 - rho * rho
    k = w.size
    # c_j Phi <= c_j M_t (c_j > 0) or c_j m_t = c_j (1 - A) + c_j B x - |c_j| gamma x^2 / 2
    # (c_j < 0): linear coefficient c_j B, quadratic |c_j| gamma / 2, constants summed here
    pos, neg = float(np.sum(w[w > 0])), float(np.sum(w[w < 0]))
    const = lam * np.where(lam > 0, A * pos + (1.0 - A) * neg, A * neg + (1.0 - A) * pos)
    lamB, lamgam = lam * B, np.abs(lam) * gam * one  # 2 (1 - rho^2) |c_j| gamma / 2 / |w_j|
    absw = np.abs(w)
    bad = np.zeros(lam.size, dtype=bool)
    logdet = np.zeros(lam.size)
    quad = np.zeros(lam.size)
    chunk = np.empty((min(k, 256), lam.size))
    d = z = None
    for i in range(k):
        base = one if k == 1 else (1.0 + rho * rho) if 0 < i < k - 1 else 1.0
        diag = base - lamgam * absw[i]
        beta = lamB * w[i]
        if i == 0:
            d, z = diag, beta
        else:
            ell = -rho / d  # T = L D L', L unit lower bidiagonal with L[i, i-1] = ell
            d = diag + rho * ell
            z = beta - ell * z  # forward solve L z = b
        bad |= ~(d > 0.0)
        d = np.where(bad, 1.0, d)
        quad += z * z / d  # b' T^-1 b = sum_i z_i^2 / d_i
        chunk[i % chunk.shape[0]] = d
        if i % chunk.shape[0] == chunk.shape[0] - 1 or i == k - 1:
            rows = i % chunk.shape[0] + 1
            logdet += np.sum(_libm.log(chunk[:rows]), axis=0)
    psi = (const + 0.5 * one * quad - 0.5 * (logdet - math.log(one))
           - lam * 0.5 * float(np.sum(w)))
    psi = np.where(bad, np.inf, psi).reshape(nt, n)
    return np.min(psi, axis=0)


__all__ = ["TANGENTS", "log_mgf", "majorant", "majorant_curvature"]
