"""Scoring a bound against simulated statistics: violations, their Clopper-Pearson
interval, and the tightness bound / empirical (1 - delta)-quantile and bound / trivial.

Shared by the check's ``bound=`` option (:func:`.check.score_bound`) and the verification
of the corrected bounds (:mod:`.verify`). The plug-in bound is estimated per trial from
that trial's g^2 before k0 (:func:`pre_switch_g2`: the process's NumPy path with the
engine's seed).
"""

from __future__ import annotations

import math

import numpy as np

from stepsim.stats import clopper_pearson
from stepsim.theorem1.bounds import sokal_autocovariance, weight_autocorrelations

CI_LEVEL = 0.95
TIE = 1e-12


def plugin_bounds(pre: np.ndarray, beta2, k0, lags, delta, d) -> np.ndarray:
    """(trials, n_lags) plug-in bounds, one Sokal estimate per trial (pre: (k0, trials, s)).

    Same numbers as ``bounds.plugin_bound`` per trial; the weights' autocorrelations
    A(h), h < k0, are computed once for all trials (Var^ = sum_|h|<=M gamma^(h) A(h)).
    """
    auto = weight_autocorrelations(beta2, k0, lags, pre.shape[0])  # (n_lags, k0)
    out = np.empty((pre.shape[1], len(lags)))
    L = math.log(2.0 * d / delta)
    for t in range(pre.shape[1]):
        gamma, _ = sokal_autocovariance(pre[:, t, :])
        var = gamma[0] * auto[:, 0] + 2.0 * auto[:, 1:gamma.size] @ gamma[1:]
        out[t] = np.sqrt(2.0 * np.maximum(var, 0.0) * L)
    return out


POOL = 10  # coordinates per trial pooled by the plug-in estimate for the inf-norm


def pre_switch_g2(process, seed, trials, dim, k0, chunk=128) -> np.ndarray:
    """g^2 at steps 1..k0 of the first POOL coordinates of each trial (the engine's path:
    same seed, same start), drawn in chunks so the full (k0, trials, dim) is never held."""
    state = process.start(seed, (trials, dim))
    parts = [process.sample(state, k, min(chunk, k0 + 1 - k))[:, :, :POOL]
             for k in range(1, k0 + 1, chunk)]
    return np.concatenate(parts)


def score(sample, b, strict_paper: bool, delta: float, trivial) -> dict:
    """Violations and tightness of bound b ((n_lags,) or per trial (n, n_lags))."""
    n = sample.shape[0]
    # a sample AT a bound is no violation of "P(|D| > b) <= delta"; TIE = 1e-12 relative
    # absorbs rounding where a path attains the trivial bound exactly (e.g. a two-state
    # chain in its low state for all k0 steps, then high: |D| = G(1-b2^n)/(1-b2^k))
    viol = np.count_nonzero(sample >= b if strict_paper else sample > b * (1.0 + TIE), axis=0)
    lo, hi = clopper_pearson(viol, n, CI_LEVEL)
    q = np.quantile(sample, 1.0 - delta, axis=0, method="inverted_cdf")
    level = np.median(b, axis=0) if np.ndim(b) == 2 else b  # plug-in: the median bound
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio_q = level / q
        ratio_t = level / trivial if trivial is not None else np.full(len(level), np.nan)
    return {"bound": level.tolist(), "n": int(n), "violations": viol.tolist(),
            "rate": (viol / n).tolist(), "ci_low": lo.tolist(), "ci_high": hi.tolist(),
            "max_ci_high": float(np.max(hi)), "ratio_quantile": ratio_q.tolist(),
            "ratio_trivial": ratio_t.tolist()}
