"""A corrected Theorem 1 for stationary, time-dependent g^2 (paper_checks/theorem1.md §4).

The statistic is a weighted sum. With a_{k,j} = (1-b2) b2^(k-j) / (1-b2^k) (j <= k), the
weights of vhat_k, and n = k - k0,

    X_n = vhat_k - vhat_k0 = sum_{j=1}^{k} w_j g_j^2,    w_j = a_{k,j} - a_{k0,j} 1[j <= k0],

and sum_j w_j = 0. If g^2 is (weakly) stationary with autocovariance gamma(h), then
E X_n = 0 and, exactly,

    Var X_n = sum_h gamma(|h|) A(h),    A(h) = sum_j w_j w_{j+h}     (A(-h) = A(h)),

i.e. the i.i.d. variance gamma(0) S (S = A(0) = sum w_j^2) times the *dependence factor*
kappa_n = Var X_n / (gamma(0) S) = 1 + 2 sum_{h>=1} rho(h) A(h) / A(0): the process's
integrated autocorrelation seen through the window of the weights (the EMA window of
~1/(1-b2) steps). kappa = 1 for independent g^2; an AR(1) with correlation time >> the
window has kappa ~ 2/(1-b2)... and the paper's bound, which assumes independence, fails.

Two corrected bounds per lag, each for one coordinate and (union bound over d
coordinates, delta -> delta / d) for the inf-norm:

* ``chebyshev``: sqrt(Var X_n / delta) (coordinate), sqrt(d Var X_n / delta) (inf-norm).
  PROVED for every weakly stationary process (Chebyshev's inequality + the union bound);
  no independence, mixing or Gaussianity needed.
* ``gauss``: sqrt(2 Var X_n log(2 / delta)) (coordinate), with log(2 d / delta) for the
  inf-norm: the sub-Gaussian (Hoeffding-form) tail with the exact variance. HEURISTIC for
  dependent g^2 (it is what a CLT over the ~1/(1-b2) effectively averaged steps
  suggests); for i.i.d. g^2 in [0, G] it is implied by Hoeffding only when
  Var <= G^2 S / 4, which always holds. Checked by simulation, not proved.

Both are capped by the worst case over all [0, G] sequences (``check.worst_case``), which
is a deterministic bound. The autocovariance of every built-in stationary process is
known in closed form (:func:`autocovariance`); a process of your own can supply
``autocovariance(max_lag) -> ndarray`` (gamma(0..max_lag), in units of g^2 squared).
"""

from __future__ import annotations

import math

import numpy as np

from stepsim._ground import libm as _libm
from stepsim.theorem1.closed_forms import worst_case


def autocovariance(process, max_lag: int) -> np.ndarray:
    """gamma(h) = Cov(g_j^2, g_{j+h}^2) for h = 0..max_lag of a stationary process.

    Built-ins in closed form (G^2 times): uniform 1/12; twopoint p(1-p)(1-low)^2;
    rademacher 0; clipped_gaussian Var(clip(mu + sigma Z, -1, 1)^2) (quadrature); spikes
    Var of its mixture; ar1 arcsin(rho^h / 2) / (2 pi) (Cov(Phi(X), Phi(Y)) for a standard
    bivariate normal of correlation r is arcsin(r/2)/(2 pi)); regime Var at h = 0 and
    (1-low)^2 (1-2q)^h / 16 at h >= 1; sine cos(2 pi h / period) / 8. Raises ValueError for
    a nonstationary process (Theorem 1 makes no claim there) and for a process of your
    own without an ``autocovariance`` method.
    """
    h = np.arange(max_lag + 1, dtype=np.float64)
    own = getattr(process, "autocovariance", None)
    if own is not None:
        gamma = np.asarray(own(max_lag), dtype=np.float64)
        if gamma.shape != h.shape:
            raise ValueError(f"process.autocovariance({max_lag}) must return {max_lag + 1} "
                             f"values, got shape {gamma.shape}")
        return gamma
    name = getattr(process, "name", None)
    if getattr(process, "stationary", None) is False:
        raise ValueError(f"process {name!r} is not stationary: it has no autocovariance")
    p = getattr(process, "params", {})
    G2 = float(process.G) ** 2
    gamma = np.zeros_like(h)
    if name == "uniform":
        gamma[0] = 1.0 / 12.0
    elif name == "twopoint":
        gamma[0] = p["p"] * (1.0 - p["p"]) * (1.0 - p["low"]) ** 2
    elif name == "rademacher":
        pass
    elif name == "clipped_gaussian":
        gamma[0] = _clipped_gaussian_variance(p["mu"], p["sigma"])
    elif name == "spikes":
        q, base = p["p"], p["base"]
        mean = q + (1.0 - q) * base / 2.0
        gamma[0] = q + (1.0 - q) * base * base / 3.0 - mean * mean
    elif name == "ar1":
        rho = p["rho"]
        gamma = np.array([math.asin(math.pow(rho, x) / 2.0) for x in h]) / (2.0 * math.pi)
    elif name == "regime":
        low, q = p["low"], p["q"]
        mean = (1.0 + low) / 4.0
        gamma[0] = (1.0 + low * low) / 6.0 - mean * mean
        gamma[1:] = (1.0 - low) ** 2 / 16.0 * np.array([math.pow(1.0 - 2.0 * q, x)
                                                         for x in h[1:]])
    elif name == "sine":
        gamma = _libm.cos(2.0 * math.pi * h / p["period"]) / 8.0
    else:
        raise ValueError(f"no autocovariance known for process {name!r}: give it an "
                         "autocovariance(max_lag) method")
    return G2 * gamma


def _clipped_gaussian_variance(mu: float, sigma: float) -> float:
    """Var(Y^2), Y = clip(mu + sigma Z, -1, 1), by quadrature over Z (unit G)."""
    from scipy import integrate, stats

    if sigma == 0.0:
        return 0.0

    def moment(power):
        f = lambda z: min(max(mu + sigma * z, -1.0), 1.0) ** (2 * power) * stats.norm.pdf(z)
        lo, hi = (-1.0 - mu) / sigma, (1.0 - mu) / sigma
        inner = integrate.quad(f, lo, hi, limit=200)[0]
        return inner + stats.norm.cdf(lo) + stats.norm.sf(hi)  # clipped tails: Y^2 = 1

    m1, m2 = moment(1), moment(2)
    return max(m2 - m1 * m1, 0.0)


def weights(beta2: float, k0: int, lag: int) -> np.ndarray:
    """w_j, j = 1..k0+lag: vhat_{k0+lag} - vhat_k0 = sum_j w_j g_j^2 (float64, sums to 0)."""
    k = k0 + lag
    j = np.arange(1, k + 1, dtype=np.float64)
    a_k = (1.0 - beta2) * np.array([math.pow(beta2, x) for x in (k - j)]) / (
        1.0 - math.pow(beta2, k))
    a_k0 = np.zeros(k)
    a_k0[:k0] = (1.0 - beta2) * np.array([math.pow(beta2, x) for x in (k0 - j[:k0])]) / (
        1.0 - math.pow(beta2, k0))
    return a_k - a_k0


def variance(gamma: np.ndarray, beta2: float, k0: int, lags) -> tuple[np.ndarray, np.ndarray]:
    """(Var X_n, S_n) at each lag n for autocovariance gamma (gamma[h], h = 0..).

    Var X_n = gamma(0) A(0) + 2 sum_{h>=1} gamma(h) A(h), with A the autocorrelation of the
    weights (FFT); gamma beyond its last entry is taken as 0, so pass max_lag >= k0 + max(lags).
    """
    out_var, out_s = [], []
    for lag in np.asarray(lags, dtype=np.int64):
        w = weights(beta2, k0, int(lag))
        size = 1 << int(2 * w.size - 1).bit_length()
        spectrum = np.fft.rfft(w, size)
        auto = np.fft.irfft(spectrum * np.conj(spectrum), size)[:w.size]  # A(0..k-1)
        auto[0] = float(np.dot(w, w))
        g = np.zeros(w.size)
        m = min(w.size, gamma.size)
        g[:m] = gamma[:m]
        out_var.append(max(g[0] * auto[0] + 2.0 * float(np.dot(g[1:], auto[1:])), 0.0))
        out_s.append(auto[0])
    return np.array(out_var), np.array(out_s)


def corrected_bounds(process, *, beta2: float, k0: int, lags, delta: float,
                     dim: int) -> dict:
    """The corrected bounds of the module docstring at each lag, and what they rest on.

    Returns a dict of float64 arrays aligned with ``lags``: "variance" (Var X_n), "kappa"
    (dependence factor; nan when gamma(0) = 0), "chebyshev_coord", "chebyshev_inf",
    "gauss_coord", "gauss_inf" (each capped by the worst case), "worst_case".
    """
    lags = np.asarray(lags, dtype=np.int64)
    gamma = autocovariance(process, k0 + int(lags[-1]))
    var, s = variance(gamma, beta2, k0, lags)
    worst = worst_case(float(process.G), beta2, k0, lags)
    with np.errstate(invalid="ignore", divide="ignore"):
        kappa = np.where(gamma[0] > 0, var / (gamma[0] * s), np.nan)
    cap = lambda b: np.minimum(b, worst)
    return {
        "variance": var, "kappa": kappa, "worst_case": worst,
        "chebyshev_coord": cap(np.sqrt(var / delta)),
        "chebyshev_inf": cap(np.sqrt(dim * var / delta)),
        "gauss_coord": cap(np.sqrt(2.0 * var * math.log(2.0 / delta))),
        "gauss_inf": cap(np.sqrt(2.0 * var * math.log(2.0 * dim / delta))),
    }


__all__ = ["autocovariance", "corrected_bounds", "variance", "weights"]
