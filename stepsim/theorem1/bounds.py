"""Theorem 1's bounds at each lag: the paper's, and the corrected ones (theorem1.md §4-5).

Notation (paper_checks/theorem1.md §5). Y_j = g_j^2 (one coordinate), n = k - k0 the lag,
w = ``corrected.weights(beta2, k0, n)`` the difference of the two bias-corrected EMA
weight vectors, so D = vhat_k - vhat_k0 = sum_j w_j Y_j (j = 1..k) and sum_j w_j = 0.
Every bound b here claims P(|D| > b) <= delta per coordinate (``dim=1``) or
P(max over dim coordinates |D| > b) <= delta (union bound over the coordinates; no
independence between them is needed). L = log(2 dim / delta).

=========== ===================================================== ========================
kind        bound                                                 assumptions (proved?)
=========== ===================================================== ========================
paper       sqrt(4 G^2 (1-b2)^2 n log(2/delta))                   the paper's: FALSE for
                                                                  dependent g (C11 (a))
chebyshev   sqrt(dim Var D / delta), Var D = w' Gamma_Y w         weakly stationary Y
                                                                  (proved)
gaussian    A: |E D| + 2 ||a||_2 sqrt(L) + 2 ||a||_inf L, a the   g stationary Gaussian
            eigenvalues of C^1/2 diag(w) C^1/2, C = gamma_g(i-j)  (proved, §5.2)
            A': |E D| + sqrt(2 Lip^2 L), Lip^2 = F'_max^2 |w|'    Y = F(x), x stationary
            |R| |w|, R = Corr(x_i, x_j), F Lipschitz              Gaussian (proved, §5.3)
markov      Chernoff with the Jiang-Sun-Fan (2018) m.g.f. bound   Y = h(X), X stationary
            for time-varying bounded f_j = w_j (h - E h)          Markov, abs. spectral gap
                                                                  1 - lambda (proved, §5.4)
gaussian-   A+: |E D| + exact Chernoff radius of D - E D from the  g stationary Gaussian
chernoff    exact m.g.f. prod_j (1 - 2 lam a_j)^-1/2              (proved, §5.9)
copula-     A'+: |E D| + Chernoff radius of the exact m.g.f. of a  Y = G Phi(x), x the
chernoff    Gaussian quadratic majorant of lam D (Phi <= / >= a     stationary Gaussian AR(1)
            quadratic at a tangent point t, per sign of w_j)      (proved, §5.11)
markov-     B+: |E D| + exact Chernoff radius, m.g.f. =           Y_j | state path indep.,
chernoff    pi' M_1 P M_2 ... P M_k 1, M_j = diag E[e^{lam w_j Y}|s]  law given S_j known;
                                                                  S finite-state stationary
                                                                  Markov (proved, §5.9)
sticky-     B'+: |E D| + Chernoff radius of an upper bound on the  Y = G u, u the stationary
chernoff    m.g.f. within ~1e-6 (log) of the exact one: backward   sticky chain (keep w.p.
            recursion over runs, trapezoid rule on convex F_k      1 - q, else fresh U[0, 1])
                                                                  (proved, §5.13)
plugin      sqrt(2 Var^ L), Var^ from a Sokal-windowed estimate   HEURISTIC (coverage
            of gamma_Y on the k0 steps before the switch          measured, not claimed)
=========== ===================================================== ========================

Each proved bound is also valid capped at the trivial bound G (1-b2^n)/(1-b2^k) (any
[0, G] sequence) and at the other proved bounds: each is a fixed number (a function of the
process's known law, b2, k0, the lag, d and delta, never of the sample), so at each lag
their minimum is one of them and holds at the same level (``corrected_bound``).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from stepsim._ground import libm as _libm
from stepsim._ground.validate import check_choice, check_int, check_real
from stepsim.theorem1.closed_forms import theorem1_bound, worst_case
from stepsim.theorem1.corrected import autocovariance, weights

KINDS = ("paper", "chebyshev", "gaussian", "markov", "gaussian-chernoff", "markov-chernoff",
         "copula-chernoff", "sticky-chernoff", "plugin")
PROVED = {"paper": False, "chebyshev": True, "gaussian": True, "markov": True,
          "gaussian-chernoff": True, "markov-chernoff": True, "copula-chernoff": True,
          "sticky-chernoff": True, "plugin": False}
#: the proved bounds that enter the corrected bound where their assumptions hold
CORRECTED_TERMS = ("chebyshev", "gaussian", "markov", "gaussian-chernoff", "markov-chernoff",
                   "copula-chernoff", "sticky-chernoff")
SOKAL_C = 5.0  # Sokal's automatic window: smallest M with M >= c tau(M)


# --- exact second moments of D -----------------------------------------------------------

def toeplitz_quadratic_form(w: np.ndarray, gamma: np.ndarray) -> float:
    """sum_{i,j} w_i w_j gamma(|i - j|) (gamma beyond its last entry taken as 0), by FFT."""
    w = np.asarray(w, dtype=np.float64)
    size = 1 << int(2 * w.size - 1).bit_length()
    spec = np.fft.rfft(w, size)
    auto = np.fft.irfft(spec * np.conj(spec), size)[:w.size]  # A(h) = sum_j w_j w_{j+h}
    auto[0] = float(np.dot(w, w))
    g = np.zeros(w.size)
    m = min(w.size, len(gamma))
    g[:m] = gamma[:m]
    return float(g[0] * auto[0] + 2.0 * np.dot(g[1:], auto[1:]))


def weight_autocorrelations(beta2: float, k0: int, lags, max_h: int) -> np.ndarray:
    """A_n(h) = sum_j w_j w_{j+h} for each lag n and h = 0..max_h-1: (n_lags, max_h)."""
    out = np.zeros((len(lags), max_h))
    for i, n in enumerate(np.asarray(lags, dtype=np.int64)):
        w = weights(beta2, k0, int(n))
        size = 1 << int(2 * w.size - 1).bit_length()
        spec = np.fft.rfft(w, size)
        auto = np.fft.irfft(spec * np.conj(spec), size)[:min(w.size, max_h)]
        auto[0] = float(np.dot(w, w))
        out[i, :auto.size] = auto
    return out


def exact_variance(gamma_y, beta2: float, k0: int, lags) -> np.ndarray:
    """Var D at each lag for the autocovariance gamma_y(h) = Cov(Y_j, Y_{j+h}), h = 0..

    Var D = sum_ij w_i w_j gamma_y(i - j) exactly (pass len(gamma_y) >= k0 + max(lags)).
    """
    gamma_y = np.asarray(gamma_y, dtype=np.float64)
    return np.array([max(toeplitz_quadratic_form(weights(beta2, k0, int(n)), gamma_y), 0.0)
                     for n in np.asarray(lags, dtype=np.int64)])


def exact_mean(mean_y: float, beta2: float, k0: int, lags) -> np.ndarray:
    """E D = E Y * sum_j w_j at each lag: 0 up to rounding (both EMA weight vectors are
    bias-corrected, so each sums to 1); computed, not assumed."""
    return np.array([mean_y * float(np.sum(weights(beta2, k0, int(n))))
                     for n in np.asarray(lags, dtype=np.int64)])


# --- Statement A: Gaussian g ---------------------------------------------------------------

def gaussian_eigen_norms(w: np.ndarray, gamma_g: np.ndarray | None = None, *,
                         ar1_rho: float | None = None) -> tuple[float, float, float]:
    """(||a||_2, ||a||_inf, sum a) for a the eigenvalues of C^1/2 diag(w) C^1/2.

    ||a||_2^2 = tr((diag(w) C)^2) = sum_ij w_i w_j C_ij^2 and sum a = tr(diag(w) C) exactly;
    ||a||_inf = the largest |eigenvalue|: dense ``eigvalsh`` (gamma_g given, k <= 4000), or
    for C_ij = rho^|i-j| the O(k) factor C = L L' (x = L z is the AR(1) recursion) and
    ARPACK on L' diag(w) L, whose Ritz values lie inside the spectrum, so the result is
    inflated by 1e-6 relative to stay an upper bound.
    """
    w = np.asarray(w, dtype=np.float64)
    k = w.size
    if ar1_rho is not None:
        gamma_g = np.array([math.pow(ar1_rho, h) for h in range(k)])
    gamma_g = np.asarray(gamma_g, dtype=np.float64)[:k]
    norm2 = math.sqrt(max(toeplitz_quadratic_form(w, gamma_g ** 2), 0.0))
    total = float(gamma_g[0] * np.sum(w))
    if ar1_rho is None:
        if k > 4000:
            raise ValueError(f"dense eigenvalues of a {k} x {k} matrix: too large; give "
                             "ar1_rho for the O(k) path")
        from scipy.linalg import eigvalsh, sqrtm, toeplitz

        half = np.real(sqrtm(toeplitz(gamma_g)))
        a = eigvalsh(half @ np.diag(w) @ half)
        return norm2, float(np.max(np.abs(a))), total
    from scipy.signal import lfilter
    from scipy.sparse.linalg import LinearOperator, eigsh

    c = np.full(k, math.sqrt(1.0 - ar1_rho * ar1_rho))
    c[0] = 1.0

    def matvec(z):
        x = lfilter([1.0], [1.0, -ar1_rho], c * np.ravel(z))  # x = L z
        r = lfilter([1.0], [1.0, -ar1_rho], (w * x)[::-1])[::-1]  # sum_{j>=i} rho^(j-i) y_j
        return c * r  # L' y

    op = LinearOperator((k, k), matvec=matvec, dtype=np.float64)
    v0 = np.ones(k)
    top = eigsh(op, k=1, which="LA", v0=v0, tol=1e-10, return_eigenvectors=False)[0]
    bottom = eigsh(op, k=1, which="SA", v0=v0, tol=1e-10, return_eigenvectors=False)[0]
    return norm2, max(abs(top), abs(bottom)) * (1.0 + 1e-6), total


@functools.lru_cache(maxsize=4096)
def _ar1_norms(rho: float, beta2: float, k0: int, lag: int) -> tuple[float, float, float]:
    return gaussian_eigen_norms(weights(beta2, k0, lag), ar1_rho=rho)


def gaussian_chi2_bound(norm2: float, norm_inf: float, mean: float, delta: float,
                        dim: int) -> float:
    """Statement A: |E D| + 2 ||a||_2 sqrt(L) + 2 ||a||_inf L, L = log(2 dim / delta)."""
    L = math.log(2.0 * dim / delta)
    return abs(mean) + 2.0 * norm2 * math.sqrt(L) + 2.0 * norm_inf * L


def gaussian_lipschitz_bound(w: np.ndarray, corr: np.ndarray, lipschitz: float,
                             delta: float, dim: int) -> float:
    """Statement A': sqrt(2 Lip^2 L), Lip^2 = lipschitz^2 sum_ij |w_i| |w_j| |corr(i-j)|."""
    lip2 = lipschitz ** 2 * toeplitz_quadratic_form(np.abs(w), np.abs(corr))
    return math.sqrt(2.0 * lip2 * math.log(2.0 * dim / delta))


# --- Statement B: Markov chains with an absolute spectral gap ----------------------------

def markov_bernstein_bound(w: np.ndarray, var_y: float, range_y: float, lam: float,
                           delta: float, dim: int) -> float:
    """Statement B: x with P(|D - E D| >= x) <= delta / dim, from Jiang, Sun & Fan (2018).

    Their theorem (f_j: X -> [-c, c], pi(f_j) = 0, time-varying allowed, X stationary with
    absolute spectral gap 1 - lam, n sigma^2 = sum_j pi(f_j^2)): for 0 <= t < (1-lam)/(5c),
    log E exp(t sum f_j(X_j)) <= (n sigma^2/c^2)(e^{tc} - 1 - tc) + n sigma^2 lam t^2 /
    (1 - lam - 5ct). Here f_j = w_j (h - E h): c = max|w| range_y, n sigma^2 = var_y sum w^2.
    Chernoff at any t gives P(S >= (psi(t) + L)/t) <= e^{-L}; we take the best t on a grid
    (each grid point is valid) and the closed form x = B c L + sqrt((B c L)^2 + 2 A v L),
    A = (1+lam)/(1-lam), B = 5/(1-lam) (1/3 if lam = 0), whichever is smaller.
    L = log(2 dim / delta) covers both tails and the dim coordinates.
    """
    w = np.asarray(w, dtype=np.float64)
    v = var_y * float(np.dot(w, w))
    c = float(np.max(np.abs(w))) * range_y
    L = math.log(2.0 * dim / delta)
    if v <= 0.0 or c <= 0.0:
        return 0.0
    A = (1.0 + lam) / (1.0 - lam)
    B = 1.0 / 3.0 if lam == 0.0 else 5.0 / (1.0 - lam)
    closed = B * c * L + math.sqrt((B * c * L) ** 2 + 2.0 * A * v * L)
    t_max = math.inf if lam == 0.0 else (1.0 - lam) / (5.0 * c)
    hi = min(t_max, 50.0 / c) * (1.0 - 1e-9)
    t = _libm.geomspace(hi * 1e-6, hi, 4000)
    # e^{tc} - 1 by scalar libm expm1 (NumPy's vectorised one differs across CPUs)
    expm1 = np.array([math.expm1(x) for x in t * c])
    psi = v / c ** 2 * expm1 - v / c ** 2 * t * c
    if lam > 0.0:
        psi = psi + v * lam * t * t / (1.0 - lam - 5.0 * c * t)
    return float(min(closed, np.min((psi + L) / t)))


def markov_lambda(process) -> float | None:
    """lambda = 1 - absolute spectral gap of the chain that drives g^2, or None.

    i.i.d. built-ins: 0 (P = Pi). ``ar1``: |rho| (g^2 = G Phi(x), x a Gaussian AR(1): a
    reversible chain whose L^2(pi) eigenfunctions are the Hermite polynomials with
    eigenvalues rho^m). ``regime``: |1 - 2q| (the chain (s_k, u_k): P = Q (x) Pi_u, norm on
    mean-zero functions = that of Q). ``sine``: None (a rotation, no gap). Processes of
    your own: a ``markov_lambda()`` method.
    """
    own = getattr(process, "markov_lambda", None)
    if own is not None:
        return float(own())
    if getattr(process, "stationary", None) is not True:
        return None
    name, p = getattr(process, "name", None), getattr(process, "params", {})
    if name in ("uniform", "twopoint", "rademacher", "clipped_gaussian", "spikes"):
        return 0.0
    if name == "ar1":
        return abs(p["rho"])
    if name == "regime":
        return abs(1.0 - 2.0 * p["q"])
    return None


def mean_g2(process) -> float | None:
    """E g^2 of a stationary process when known in closed form, else None."""
    own = getattr(process, "mean_g2", None)
    if own is not None:
        return float(own())
    name, p, G = getattr(process, "name", None), getattr(process, "params", {}), process.G
    table = {"uniform": 0.5, "ar1": 0.5, "rademacher": 1.0}
    if name in table:
        return G * table[name]
    if name == "twopoint":
        return G * (p["p"] + (1.0 - p["p"]) * p["low"])
    if name == "spikes":
        return G * (p["p"] + (1.0 - p["p"]) * p["base"] / 2.0)
    if name == "regime":
        return G * (1.0 + p["low"]) / 4.0
    return None


# --- the plug-in (heuristic) ------------------------------------------------------------

def sokal_autocovariance(y: np.ndarray, c: float = SOKAL_C) -> tuple[np.ndarray, int]:
    """(gamma^(0..M), M): the windowed autocovariance estimate of Sokal's automatic window.

    y: (m,) one series or (m, s) s series of the same law (their estimates are averaged).
    gamma^(h) = sum_t (y_t - ybar)(y_{t+h} - ybar) / m (the biased, positive-definite one);
    M is the smallest window with M >= c tau^(M), tau^(M) = 1 + 2 sum_{h=1}^M rho^(h).
    """
    y = np.asarray(y, dtype=np.float64)
    if y.ndim == 1:
        y = y[:, None]
    m = y.shape[0]
    z = y - y.mean(axis=0)
    size = 1 << int(2 * m - 1).bit_length()
    spec = np.fft.rfft(z, size, axis=0)
    gamma = np.fft.irfft(spec * np.conj(spec), size, axis=0)[:m].mean(axis=1) / m
    if gamma[0] <= 0.0:
        return gamma[:1], 0
    tau = 1.0 + 2.0 * np.cumsum(gamma[1:] / gamma[0])
    ok = np.nonzero(np.arange(1, m) >= c * tau)[0]
    M = int(ok[0]) + 1 if ok.size else m - 1
    return gamma[:M + 1], M


def plugin_bound(y_pre: np.ndarray, beta2: float, k0: int, lags, delta: float,
                 dim: int) -> tuple[np.ndarray, float]:
    """HEURISTIC: (sqrt(2 Var^ D L) at each lag, tau_beta^), Var^ from ``sokal_autocovariance``
    of the observed g^2 before the switch (y_pre: (m,) or (m, s)).

    tau_beta^ = 1 + 2 sum_{h=1}^M b2^h rho^(h), the discounted integrated autocorrelation
    time. Not proved: the window truncates the autocovariance and the Gaussian tail is
    assumed; its coverage is measured in paper_checks/theorem1_bounds.py.
    """
    gamma, M = sokal_autocovariance(y_pre)
    var = exact_variance(gamma, beta2, k0, lags)
    L = math.log(2.0 * dim / delta)
    rho = gamma[1:] / gamma[0] if gamma[0] > 0 else np.zeros(0)
    tau_beta = 1.0 + 2.0 * float(np.sum(_libm.power(beta2, np.arange(1.0, M + 1)) * rho))
    return np.sqrt(2.0 * var * L), tau_beta


# --- one entry point ------------------------------------------------------------------------

def check_bound_args(kind, delta, dim) -> tuple[str, float, int]:
    kind = check_choice("bound", kind, KINDS)
    delta = check_real("delta", delta, minimum=0.0, maximum=1.0, min_open=True, max_open=True)
    dim = check_int("dim", dim, minimum=1)
    return kind, delta, dim


def applicable(kind: str, process) -> str | None:
    """None if ``process`` meets the assumptions of bound ``kind``, else why not."""
    name = getattr(process, "name", type(process).__name__)
    if kind == "paper":
        return None
    if getattr(process, "stationary", None) is not True:
        return f"process {name!r} is not stationary: no corrected bound applies"
    if kind in ("chebyshev", "plugin"):
        return None
    if kind == "gaussian":
        if hasattr(process, "gaussian_autocovariance") or name == "ar1":
            return None
        return (f"process {name!r} is neither Gaussian (g) nor a Lipschitz function of a "
                "Gaussian process: Statement A does not apply")
    if kind == "gaussian-chernoff":
        if hasattr(process, "gaussian_autocovariance"):
            return None
        return f"process {name!r} has no Gaussian g: Statement A+ does not apply"
    if kind == "copula-chernoff":
        if name == "ar1" and isinstance(getattr(process, "params", None), dict) \
                and "rho" in process.params:
            return None
        return (f"process {name!r} is not g^2 = G Phi(x) of a stationary Gaussian AR(1) "
                "(the built-in ar1): Statement A'+ does not apply")
    if kind == "sticky-chernoff":
        from stepsim.theorem1.sticky import applies

        if applies(process):
            return None
        return (f"process {name!r} is not the stationary sticky chain g^2 = G u (the built-in "
                "sticky): Statement B'+ does not apply")
    if kind == "markov-chernoff":
        from stepsim.theorem1.chernoff import state_model

        if state_model(process) is not None:
            return None
        return (f"process {name!r} is not a finite-state Markov modulation with known "
                "conditional laws: Statement B+ does not apply")
    if getattr(process, "gaussian_autocovariance", None) is not None:
        return f"process {name!r} has unbounded g^2: Statement B does not apply"
    if markov_lambda(process) is None:
        return (f"process {name!r} is not a function of a chain with an absolute spectral "
                "gap: Statement B does not apply")
    if markov_lambda(process) >= 1.0:
        return f"process {name!r} has lambda = 1 (no spectral gap): Statement B does not apply"
    return None


def bound(kind: str, process, *, beta2: float, k0: int, lags, delta: float, dim: int = 1,
          y_pre=None) -> np.ndarray:
    """Bound ``kind`` (one of ``KINDS``, table in the module docstring) at each lag.

    process: a built-in or protocol process; dim: coordinates covered by the union bound
    (1 = one coordinate). y_pre (plugin only): observed g^2 before the switch, (m,) or
    (m, s). Raises ValueError for an unknown kind, delta outside (0, 1), dim < 1, or a
    process that does not meet the bound's assumptions (``applicable``).
    """
    kind, delta, dim = check_bound_args(kind, delta, dim)
    lags = np.asarray(lags, dtype=np.int64)
    why = applicable(kind, process)
    if why is not None:
        raise ValueError(f"--bound {kind}: {why}")
    G = float(process.G)
    if kind == "paper":
        return theorem1_bound(G, beta2, lags, delta)
    if kind == "plugin":
        if y_pre is None:
            raise ValueError("the plug-in bound needs y_pre, the g^2 observed before k0")
        return plugin_bound(y_pre, beta2, k0, lags, delta, dim)[0]
    gamma_y = autocovariance(process, k0 + int(lags[-1]))
    if kind == "chebyshev":
        return np.sqrt(dim * exact_variance(gamma_y, beta2, k0, lags) / delta)
    if kind.endswith("-chernoff"):
        L = math.log(2.0 * dim / delta)
        return np.array([chernoff_bound(kind, process, beta2, k0, int(n), L) for n in lags])
    out = []
    for n in lags:
        w = weights(beta2, k0, int(n))
        if kind == "gaussian" and hasattr(process, "gaussian_autocovariance"):
            rho = process.params.get("rho") if process.name == "gauss_ar1" else None
            if rho is not None:  # the O(k) path, cached: it does not depend on delta, dim
                scale = float(process.gaussian_autocovariance(0)[0])  # Var g
                n2, ninf, mean = (scale * x for x in _ar1_norms(float(rho), float(beta2),
                                                                int(k0), int(n)))
            else:
                n2, ninf, mean = gaussian_eigen_norms(
                    w, process.gaussian_autocovariance(w.size - 1))
            out.append(gaussian_chi2_bound(n2, ninf, mean, delta, dim))
        elif kind == "gaussian":  # built-in ar1: g^2 = G Phi(x), Phi is 1/sqrt(2 pi)-Lipschitz
            corr = np.array([math.pow(process.params["rho"], h) for h in range(w.size)])
            out.append(gaussian_lipschitz_bound(w, corr, G / math.sqrt(2.0 * math.pi),
                                                delta, dim))
        else:
            mu = mean_g2(process)
            rng = G if mu is None else max(mu, G - mu)
            out.append(markov_bernstein_bound(w, float(gamma_y[0]), rng,
                                              markov_lambda(process), delta, dim))
    return np.array(out)


def corrected_bound(process, *, beta2: float, k0: int, lags, delta: float,
                    dim: int = 1) -> tuple[np.ndarray, str]:
    """min(Chebyshev, A, A+, A'+, B, B+, B'+ where they apply, trivial) at each lag, and which
    of the statements entered ("+"-joined kinds besides Chebyshev, e.g. "markov+markov-chernoff";
    "" if none applies).

    Valid at level delta: every term is a fixed number (the process's known law, b2, k0,
    the lag, dim and delta decide it; nothing depends on the sample), so at each lag the
    minimum equals one term b* and P(stat > min) = P(stat > b*) <= delta.
    """

    best = bound("chebyshev", process, beta2=beta2, k0=k0, lags=lags, delta=delta, dim=dim)
    used = []
    for kind in CORRECTED_TERMS[1:]:
        if applicable(kind, process) is None:
            best = np.minimum(best, bound(kind, process, beta2=beta2, k0=k0, lags=lags,
                                          delta=delta, dim=dim))
            used.append(kind)
    if getattr(process, "gaussian_autocovariance", None) is None:
        best = np.minimum(best, worst_case(float(process.G), beta2, k0, lags))
    return best, "+".join(used)


# --- Statements A+ / B+: exact Chernoff -------------------------------------------------------

def _process_key(process) -> tuple:
    params = tuple(sorted(getattr(process, "params", {}).items()))
    return (getattr(process, "name", type(process).__name__), params, float(process.G))


_PSI_CACHE: dict = {}


def chernoff_psi(kind: str, process, beta2: float, k0: int, n: int):
    """(lams, psi(lams), psi(-lams)) of D at lag n: the centred log-m.g.f. of D on the
    Chernoff grid, for the upper and the lower tail; cached (it depends on neither delta
    nor d) for the built-in and chain processes, keyed by name, parameters and G.
    "copula-chernoff" gives an upper bound on psi (``copula.log_mgf``) on every third
    point of the grid (its cost is ~10 tangent points x the exponents x k steps);
    "sticky-chernoff" an upper bound on psi (``sticky.log_mgf``, the trapezoid bracket's
    upper end) on every ``sticky.STRIDE``-th point (O(k x sticky.NODES) per exponent)."""
    from stepsim.theorem1 import chernoff

    key = (kind, _process_key(process), float(beta2), int(k0), int(n))
    if key in _PSI_CACHE:
        return _PSI_CACHE[key]
    w = weights(beta2, k0, n)
    gamma_y = autocovariance(process, w.size - 1)
    sd = math.sqrt(max(toeplitz_quadratic_form(w, gamma_y), 0.0))
    if sd == 0.0:
        out = (None, None, None)
    else:
        lams = chernoff.lam_grid(sd)
        if kind == "sticky-chernoff":
            from stepsim.theorem1 import sticky

            lams = lams[::sticky.STRIDE]
            both = sticky.log_mgf(w, np.concatenate([lams, -lams]),
                                  q=float(process.params["q"]), G=float(process.G))
            out = (lams, both[:lams.size], both[lams.size:])
        elif kind == "copula-chernoff":
            from stepsim.theorem1 import copula

            lams = lams[::3]
            both = copula.log_mgf(w, np.concatenate([lams, -lams]),
                                  rho=float(process.params["rho"]), G=float(process.G))
            out = (lams, both[:lams.size], both[lams.size:])
        elif kind == "gaussian-chernoff":
            gam = process.gaussian_autocovariance(w.size - 1)
            rho = process.params.get("rho") if process.name == "gauss_ar1" else None
            opts = {"ar1": (float(gam[0]), float(rho))} if rho is not None else {"gamma_g": gam}
            f = functools.partial(chernoff.gaussian_log_mgf, w, **opts)
        else:
            f = functools.partial(chernoff.markov_log_mgf, w, model=chernoff.state_model(process))
        if kind not in ("copula-chernoff", "sticky-chernoff"):
            out = (lams, f(lams), f(-lams))
    if len(_PSI_CACHE) > 4096:
        _PSI_CACHE.clear()
    _PSI_CACHE[key] = out
    return out


def chernoff_bound(kind: str, process, beta2: float, k0: int, n: int, L: float) -> float:
    """Statement A+ ("gaussian-chernoff"), A'+ ("copula-chernoff"), B+ ("markov-chernoff") or
    B'+ ("sticky-chernoff") at lag n: |E D| + the larger of the two Chernoff radii at e^{-L}
    each (P(|D| > b) <= 2 e^{-L})."""
    from stepsim.theorem1.chernoff import chernoff_radius, state_model

    lams, up, down = chernoff_psi(kind, process, beta2, k0, n)
    if lams is None:  # Var D = 0: D = E D almost surely
        return 0.0
    w = weights(beta2, k0, n)
    mean = (float(process.gaussian_autocovariance(0)[0]) if kind == "gaussian-chernoff"
            else mean_g2(process) if kind in ("copula-chernoff", "sticky-chernoff")
            else state_model(process).mean()) * float(np.sum(w))
    return abs(mean) + max(chernoff_radius(lams, up, L)[0], chernoff_radius(lams, down, L)[0])


__all__ = ["CORRECTED_TERMS", "KINDS", "PROVED", "applicable", "bound", "chernoff_bound",
           "chernoff_psi", "corrected_bound", "exact_mean",
           "exact_variance", "gaussian_chi2_bound", "gaussian_eigen_norms",
           "gaussian_lipschitz_bound", "markov_bernstein_bound", "markov_lambda", "mean_g2",
           "plugin_bound", "sokal_autocovariance", "toeplitz_quadratic_form",
           "weight_autocorrelations"]
