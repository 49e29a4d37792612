"""Exact Chernoff bounds for D = sum_j w_j Y_j, Y_j = g_j^2 (Statements A+ / B+).

Both bounds compute the moment generating function (m.g.f.) of D EXACTLY (no inequality
between the m.g.f. and the bound other than Markov's) and apply Markov's inequality to
exp(lam D): for every admissible lam > 0,

    P(D - E D >= (psi(lam) + L) / lam) <= e^{-L},   psi(lam) = log E e^{lam D} - lam E D.

With L = log(2 d / delta) and the same for -D, the two tails of the d coordinates sum to
delta (union bound). Each lam gives a valid bound, so taking the best lam of a fixed grid
keeps validity (``chernoff_radius``). Proofs: paper_checks/theorem1.md §5.9.

* **A+ (Gaussian g)**: g = (g_1..g_k) a stationary mean-zero Gaussian vector, covariance
  C_ij = gamma_g(i - j); D = g' diag(w) g. log E e^{lam D} = -1/2 sum_j log(1 - 2 lam a_j),
  a the eigenvalues of C^1/2 diag(w) C^1/2, finite iff 2 lam a_j < 1 for all j (mixed signs
  allowed). For C = s2 rho^|i-j| (AR(1)) it is -1/2 [log det T - log(1 - rho^2)], T the
  tridiagonal s2 (1 - rho^2) C^-1 - 2 lam s2 (1 - rho^2) diag(w), by an O(k) LDL'
  recursion whose pivots are all > 0 iff lam is admissible (``gaussian_log_mgf``).
* **B+ (finite-state Markov modulation)**: a stationary Markov chain S_j on states
  0..m-1 (transition P, stationary pi) and Y_j drawn given the state path independently,
  from a law that depends on S_j only. Then E e^{lam D} = pi' M_1 P M_2 P ... P M_k 1,
  M_j = diag(E[e^{lam w_j Y} | S = s]) exactly, time-varying weights included
  (``markov_log_mgf``). The conditional laws here are mixtures of point masses and
  uniforms (``StateModel``), which covers the i.i.d. built-ins uniform / twopoint /
  spikes (one state), ``regime`` and ``twostate``. Not covered: ``sticky`` and ``ar1``
  (continuous state; ``sticky.py`` and ``copula.py`` cover them), ``sine`` (not mixing).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from stepsim._ground import libm as _libm

#: lam * sd(D) on this geometric grid (sd = sqrt(Var D)); every point is a valid Chernoff
#: exponent, the grid only decides how close to the infimum the bound gets
GRID = (1e-2, 1e3, 241)
#: relative inflation of the returned radius: absorbs rounding in psi (a few 1e-13 relative)
ROUND_UP = 1e-9


def chernoff_radius(lams: np.ndarray, psi: np.ndarray, L: float) -> tuple[float, float]:
    """(x, lam): the smallest (psi(lam) + L) / lam over the grid, rounded up, and its lam.

    lams: (n,) > 0; psi: (n,) centred log-m.g.f. (+inf where inadmissible). Any lam gives
    P(D - E D >= x) <= e^{-L}; raises ValueError if no lam on the grid is admissible.
    """
    lams = np.asarray(lams, dtype=np.float64)
    psi = np.asarray(psi, dtype=np.float64)
    ok = np.isfinite(psi)
    if not np.any(ok):
        raise ValueError("no admissible Chernoff exponent on the grid (m.g.f. infinite)")
    vals = np.where(ok, (np.where(ok, psi, 0.0) + L) / lams, np.inf)
    i = int(np.argmin(vals))
    x = float(vals[i])
    return x * (1.0 + ROUND_UP), float(lams[i])


def lam_grid(sd: float) -> np.ndarray:
    """The Chernoff exponents tried: GRID scaled by 1 / sd(D)."""
    if not sd > 0.0:
        raise ValueError(f"sd(D) must be > 0, got {sd!r}")
    lo, hi, n = GRID
    return _libm.geomspace(lo / sd, hi / sd, n)


# --- A+: Gaussian g ---------------------------------------------------------------------------

def _tridiagonal_logdet(diag: np.ndarray, off2: float) -> np.ndarray:
    """log det of symmetric tridiagonal matrices, one per column of diag ((k, n)), all with
    squared off-diagonal off2; -inf marks a matrix that is not positive definite (some
    pivot <= 0). LDL' pivots: d_1 = a_1, d_i = a_i - off2 / d_{i-1}; the matrix is
    positive definite iff every pivot is > 0 (Sylvester: the pivots are ratios of
    consecutive leading minors)."""
    k, n = diag.shape
    piv = np.empty((k, n))
    d = diag[0].copy()
    bad = d <= 0.0
    piv[0] = d
    for i in range(1, k):
        d = diag[i] - off2 / np.where(bad, 1.0, d)
        bad |= d <= 0.0
        piv[i] = d
    piv[:, bad] = 1.0
    out = np.sum(_libm.log(piv), axis=0)
    out[bad] = -np.inf
    return out


def gaussian_log_mgf(w: np.ndarray, lams: np.ndarray, *, gamma_g: np.ndarray | None = None,
                     ar1: tuple[float, float] | None = None) -> np.ndarray:
    """Centred log E exp(lam D), D = sum_j w_j g_j^2, g stationary mean-zero Gaussian.

    w: (k,) weights (any signs); lams: (n,) exponents (either sign). Give the covariance as
    gamma_g(h), h = 0..k-1 (dense eigenvalues, k <= 4000), or ar1 = (s2, rho) for
    gamma_g(h) = s2 rho^|h| (O(k) per exponent). Returns psi(lam) = log E e^{lam D} -
    lam E D, +inf where 2 lam a_j >= 1 for some eigenvalue a_j of C^1/2 diag(w) C^1/2.
    """
    w = np.asarray(w, dtype=np.float64)
    lams = np.asarray(lams, dtype=np.float64)
    k = w.size
    if (gamma_g is None) == (ar1 is None):
        raise ValueError("give exactly one of gamma_g or ar1=(s2, rho)")
    if ar1 is not None:
        s2, rho = float(ar1[0]), float(ar1[1])
        if not s2 > 0.0 or not -1.0 < rho < 1.0:
            raise ValueError(f"ar1=(s2, rho) needs s2 > 0 and |rho| < 1, got {ar1!r}")
        one = 1.0 - rho * rho
        base = np.full(k, 1.0 + rho * rho)
        base[0] = base[-1] = 1.0
        if k == 1:
            base[0] = one
        diag = base[:, None] - 2.0 * s2 * one * np.outer(w, lams)
        logdet = _tridiagonal_logdet(diag, rho * rho) if k > 1 else _libm.log(
            np.where(diag[0] > 0.0, diag[0], 1.0)) + np.where(diag[0] > 0.0, 0.0, -np.inf)
        mean = s2 * float(np.sum(w))
        with np.errstate(invalid="ignore"):
            psi = -0.5 * (logdet - math.log(one)) - lams * mean
        return np.where(np.isfinite(logdet), psi, np.inf)
    a = gaussian_eigenvalues(w, gamma_g)
    out = np.empty(lams.size)
    for i, lam in enumerate(lams):
        z = 1.0 - 2.0 * lam * a
        out[i] = (-0.5 * float(np.sum(_libm.log(z))) - lam * float(np.sum(a))
                  if np.all(z > 0.0) else np.inf)
    return out


def gaussian_eigenvalues(w: np.ndarray, gamma_g: np.ndarray) -> np.ndarray:
    """Eigenvalues of C^1/2 diag(w) C^1/2, C_ij = gamma_g(|i - j|) (dense; k <= 4000).

    Raises ValueError if C is not positive semi-definite (smallest eigenvalue below
    -1e-10 relative): then gamma_g is no autocovariance.
    """
    from scipy.linalg import eigh, eigvalsh, toeplitz

    w = np.asarray(w, dtype=np.float64)
    k = w.size
    if k > 4000:
        raise ValueError(f"dense eigenvalues of a {k} x {k} matrix: too large; give ar1=")
    gamma_g = np.asarray(gamma_g, dtype=np.float64)
    if gamma_g.size < k:
        raise ValueError(f"gamma_g needs {k} lags, got {gamma_g.size}")
    ev, U = eigh(toeplitz(gamma_g[:k]))
    if ev[0] < -1e-10 * max(abs(ev[-1]), 1e-300):
        raise ValueError(f"gamma_g is not positive semi-definite (eigenvalue {ev[0]:.3g}): "
                         "not an autocovariance")
    half = (U * np.sqrt(np.maximum(ev, 0.0))) @ U.T
    return eigvalsh(half @ (w[:, None] * half))


# --- B+: finite-state Markov modulation -----------------------------------------------------

@dataclasses.dataclass(frozen=True)
class StateModel:
    """A stationary Markov chain on m states and the conditional law of Y given the state.

    P: (m, m) row-stochastic transition matrix; pi: (m,) stationary law (pi P = pi);
    laws: per state, a mixture [(prob, lo, hi), ...] of U[lo, hi] (point mass if lo == hi).
    Y_j given the whole state path is independent over j with the law of state S_j.
    """

    P: np.ndarray
    pi: np.ndarray
    laws: tuple

    def __post_init__(self):
        P = np.asarray(self.P, dtype=np.float64)
        pi = np.asarray(self.pi, dtype=np.float64)
        m = pi.size
        if P.shape != (m, m) or np.any(P < 0) or not np.allclose(P.sum(axis=1), 1.0):
            raise ValueError(f"P must be a ({m}, {m}) row-stochastic matrix, got {P!r}")
        if np.any(pi < 0) or not np.isclose(pi.sum(), 1.0) or not np.allclose(pi @ P, pi):
            raise ValueError(f"pi must be a stationary law of P, got {pi!r}")
        if len(self.laws) != m:
            raise ValueError(f"need one law per state ({m}), got {len(self.laws)}")
        for law in self.laws:
            if not law or any(p < 0 or lo > hi for p, lo, hi in law) \
                    or not math.isclose(sum(p for p, _, _ in law), 1.0):
                raise ValueError(f"a law is a list of (prob >= 0, lo <= hi) summing to 1: "
                                 f"{law!r}")
        object.__setattr__(self, "P", P)
        object.__setattr__(self, "pi", pi)

    def mean(self) -> float:
        """E Y under the stationary law."""
        return float(sum(self.pi[s] * sum(p * (lo + hi) / 2.0 for p, lo, hi in law)
                         for s, law in enumerate(self.laws)))

    def cond_log_mgf(self, t: np.ndarray) -> np.ndarray:
        """log E[e^{t Y} | S = s]: (m, *t.shape)."""
        t = np.asarray(t, dtype=np.float64)
        out = []
        for law in self.laws:
            terms = [math.log(p) + t * lo + (log_phi(t * (hi - lo)) if hi > lo else 0.0)
                     for p, lo, hi in law if p > 0.0]
            if len(terms) == 1:  # log-sum-exp of one term is the term
                out.append(np.broadcast_to(terms[0], t.shape))
                continue
            top = np.max(terms, axis=0)
            out.append(top + _libm.log(np.sum([_libm.exp(x - top) for x in terms], axis=0)))
        return np.array(out)


def log_phi(s: np.ndarray) -> np.ndarray:
    """log E e^{s U}, U ~ U[0, 1]: log(expm1(s) / s), stable for all s (0 at s = 0)."""
    s = np.asarray(s, dtype=np.float64)
    small = np.abs(s) < 1e-4
    mag = np.where(small, 1.0, np.abs(s))
    # expm1(s)/s = e^{max(s,0)} (1 - e^{-|s|}) / |s| for either sign of s
    big = np.maximum(s, 0.0) + _libm.log(-_libm.expm1(-mag)) - _libm.log(mag)
    return np.where(small, s / 2.0 + s * s / 24.0, big)


def markov_log_mgf(w: np.ndarray, lams: np.ndarray, model: StateModel) -> np.ndarray:
    """Centred log E exp(lam D), D = sum_j w_j Y_j under ``model``: (n,) for lams (n,).

    pi' M_1 P M_2 P ... P M_k 1 by the backward recursion v <- M_j P v (v = 1 after step
    k), each v rescaled by its largest entry (the logs of the scales are summed), so no
    overflow for any lam; exact up to rounding.
    """
    w = np.asarray(w, dtype=np.float64)
    lams = np.asarray(lams, dtype=np.float64)
    k = w.size
    logm = model.cond_log_mgf(np.outer(w, lams))  # (m, k, n)
    shift = logm.max(axis=0)  # (k, n): factor each M_j by its largest entry
    M = np.ascontiguousarray(_libm.exp(logm - shift[None]).transpose(1, 0, 2))  # (k, m, n)
    v = np.ones((model.pi.size, lams.size))
    scales = np.empty((k, lams.size))
    for j in range(k - 1, -1, -1):
        v = M[j] * v
        top = v.max(axis=0)
        v = v / top
        scales[j] = top
        if j > 0:
            v = model.P @ v
    total = model.pi @ v
    logmgf = (np.sum(shift, axis=0) + np.sum(_libm.log(scales), axis=0)
              + _libm.log(total))
    return logmgf - lams * model.mean() * float(np.sum(w))


def state_model(process) -> StateModel | None:
    """The ``StateModel`` of a process B+ covers, or None.

    Built-ins: uniform, twopoint, spikes (i.i.d.: one state), regime (shared or not: the
    union bound over coordinates needs no independence); chains: twostate. A process of
    your own: a ``state_model()`` method returning a StateModel.
    """
    own = getattr(process, "state_model", None)
    if own is not None:
        return own()
    if getattr(process, "stationary", None) is not True:
        return None
    name, p, G = getattr(process, "name", None), getattr(process, "params", {}), process.G
    one = np.ones((1, 1))
    if name == "uniform":
        return StateModel(one, np.ones(1), (((1.0, 0.0, G),),))
    if name == "twopoint":
        return StateModel(one, np.ones(1), (((p["p"], G, G),
                                             (1.0 - p["p"], p["low"] * G, p["low"] * G)),))
    if name == "spikes":
        return StateModel(one, np.ones(1), (((p["p"], G, G),
                                             (1.0 - p["p"], 0.0, p["base"] * G)),))
    if name == "regime":
        q = p["q"]
        return StateModel(np.array([[1.0 - q, q], [q, 1.0 - q]]), np.array([0.5, 0.5]),
                          (((1.0, 0.0, p["low"] * G),), ((1.0, 0.0, G),)))
    if name == "twostate":
        a, b = p["a"], p["b"]
        return StateModel(np.array([[1.0 - a, a], [b, 1.0 - b]]),
                          np.array([b / (a + b), a / (a + b)]),
                          (((1.0, p["low"] * G, p["low"] * G),), ((1.0, G, G),)))
    return None


def two_sided_radius(log_mgf, sd: float, L: float) -> float:
    """max of the upper and lower Chernoff radii at e^{-L} each: log_mgf(lams) is the
    centred log-m.g.f. of D at lams (either sign); the lower tail is that of -D."""
    lams = lam_grid(sd)
    up = chernoff_radius(lams, log_mgf(lams), L)[0]
    down = chernoff_radius(lams, log_mgf(-lams), L)[0]
    return max(up, down)


__all__ = ["GRID", "StateModel", "chernoff_radius", "gaussian_eigenvalues",
           "gaussian_log_mgf", "lam_grid", "markov_log_mgf", "state_model",
           "two_sided_radius"]
