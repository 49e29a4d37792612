"""Statistics over seeds, on scipy.stats: confidence intervals and paired comparisons.

* :func:`mean_ci` — the mean of a metric over seeds with a confidence interval: Student's t
  (default) or a seeded bootstrap (``scipy.stats.bootstrap``, BCa).
* :func:`paired_difference` — two conditions run on the same seeds (same initial weights and
  minibatches): the mean difference a - b with its t-interval, the paired t-test, the
  Wilcoxon signed-rank test, the number of pairs and the effect size Cohen's d_z
  (mean difference / standard deviation of the differences, ddof=1).
* :func:`markdown_table` — rows of dicts as a GitHub markdown table.

Results are frozen dataclasses; a statistic that is undefined for the data (an interval
from one seed, a test on differences that are all zero) is NaN, never an exception or a
made-up number.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from stepsim._validate import check_choice, check_open_unit

CI_METHODS = ("t", "bootstrap")


def _sample(name: str, values) -> np.ndarray:
    """``values`` as a 1-d float64 array of finite numbers (text, None, dicts refused:
    np.asarray would parse "1.5" as a number and fail on the rest with NumPy's words)."""
    raw = np.asarray(values) if not isinstance(values, (str, bytes, dict)) else None
    if raw is None or raw.dtype.kind not in "iuf":
        kind = type(values).__name__ if raw is None else f"{raw.dtype} values"
        raise TypeError(f"{name} must be a sequence or array of real numbers (one per seed), "
                        f"got {kind}: {values!r:.80}")
    x = raw.astype(np.float64)
    if x.ndim != 1:
        raise ValueError(f"{name} must be 1-d (one value per seed), got shape {x.shape}")
    if x.size == 0:
        raise ValueError(f"{name} is empty: a statistic needs at least one value")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} has non-finite values: {x[~np.isfinite(x)][:5].tolist()}")
    return x


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A mean over n values with its confidence interval [low, high].

    std: sample standard deviation (ddof=1; NaN for n = 1). method: "t" or "bootstrap".
    low, high are NaN when the interval is undefined (n = 1).
    """

    n: int
    mean: float
    std: float
    low: float
    high: float
    confidence: float
    method: str

    @property
    def half_width(self) -> float:
        """(high - low) / 2: the "±" of a symmetric t-interval."""
        return (self.high - self.low) / 2

    def __str__(self):
        return f"{self.mean:.4g} [{self.low:.4g}, {self.high:.4g}] (n={self.n})"


def mean_ci(values, *, confidence: float = 0.95, method: str = "t", n_resamples: int = 9999,
            rng=None) -> Estimate:
    """Mean of ``values`` (one per seed) with a ``confidence`` interval.

    Parameters
    ----------
    values : array_like, shape (n,)
        Finite values, one per seed.
    confidence : float in (0, 1)
        Coverage of the interval (default 0.95).
    method : {"t", "bootstrap"}
        "t": mean ± t_{(1+c)/2, n-1} * std / sqrt(n) (``scipy.stats.t.ppf``): the one
        t-interval of stepsim (sweep summaries, the paper checks' effects and figures).
        "bootstrap": ``scipy.stats.bootstrap`` (BCa, ``n_resamples`` resamples) drawn from
        ``rng`` (a seed or Generator, normalised by ``np.random.default_rng``: pass a seed
        for a reproducible interval). BCa intervals are too narrow for a handful of seeds;
        prefer "t" below ~20 values.

    Returns
    -------
    Estimate
        n, mean, std (ddof=1), low, high. For n = 1 the interval is NaN; for values that
        are all equal it is [mean, mean].
    """
    from scipy import stats

    x = _sample("values", values)
    confidence = check_open_unit("confidence", confidence)
    check_choice("method", method, CI_METHODS)
    n = x.size
    mean = math.fsum(x.tolist()) / n  # exactly rounded: the same for any summation order
    std = float(np.std(x, ddof=1)) if n > 1 else math.nan
    if n == 1:
        low = high = math.nan
    elif std == 0.0:  # every seed gave the same value: no spread, the interval is a point
        low = high = mean
    elif method == "t":
        half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * std / math.sqrt(n)
        low, high = mean - half, mean + half
    else:
        rng = np.random.default_rng(rng)
        res = stats.bootstrap((x,), np.mean, confidence_level=confidence,
                              n_resamples=int(n_resamples), method="BCa", rng=rng)
        low, high = res.confidence_interval
    return Estimate(n=n, mean=mean, std=std, low=float(low), high=float(high),
                    confidence=confidence, method=method)


@dataclasses.dataclass(frozen=True)
class PairedComparison:
    """a - b over n pairs (same seeds).

    mean_diff: mean of d = a - b; low, high: its t confidence interval; std_diff: std of d
    (ddof=1). cohen_dz: mean_diff / std_diff (Cohen's d_z, the paired-design effect size;
    +-inf when every difference is the same non-zero number, NaN when all are zero).
    t_statistic, t_pvalue: paired t-test (``scipy.stats.ttest_rel``, two-sided).
    wilcoxon_statistic, wilcoxon_pvalue: Wilcoxon signed-rank test (``scipy.stats.wilcoxon``,
    two-sided, zero differences dropped, exact p for small n without ties); NaN when every
    difference is zero.
    """

    n: int
    mean_diff: float
    low: float
    high: float
    std_diff: float
    cohen_dz: float
    t_statistic: float
    t_pvalue: float
    wilcoxon_statistic: float
    wilcoxon_pvalue: float
    confidence: float


def paired_difference(a, b, *, confidence: float = 0.95) -> PairedComparison:
    """Compare ``a`` and ``b`` measured on the same seeds (a[i] and b[i] share seed i).

    Parameters
    ----------
    a, b : array_like, shape (n,)
        Finite values, paired by position; n >= 2.
    confidence : float in (0, 1)
        Coverage of the interval on the mean difference.

    Returns
    -------
    PairedComparison
        n, mean difference a - b with its t-interval, Cohen's d_z, paired t-test and
        Wilcoxon signed-rank test (both two-sided).
    """
    import warnings

    from scipy import stats

    a, b = _sample("a", a), _sample("b", b)
    if a.shape != b.shape:
        raise ValueError(f"a and b must pair up one to one, got {a.size} and {b.size} values")
    if a.size < 2:
        raise ValueError(f"a paired comparison needs at least 2 pairs, got {a.size}")
    d = a - b
    est = mean_ci(d, confidence=confidence)
    if est.std > 0:
        dz = est.mean / est.std
        t = stats.ttest_rel(a, b)
        t_stat, t_p = float(t.statistic), float(t.pvalue)
    else:  # constant differences: the t statistic is +-inf (or undefined when all zero)
        dz = math.copysign(math.inf, est.mean) if est.mean != 0 else math.nan
        t_stat = dz
        t_p = 0.0 if est.mean != 0 else math.nan
    if np.any(d != 0):
        with warnings.catch_warnings():  # scipy warns that exact p is unavailable with ties
            warnings.simplefilter("ignore")
            w = stats.wilcoxon(a, b)
        w_stat, w_p = float(w.statistic), float(w.pvalue)
    else:
        w_stat = w_p = math.nan
    return PairedComparison(n=int(a.size), mean_diff=est.mean, low=est.low, high=est.high,
                            std_diff=est.std, cohen_dz=float(dz), t_statistic=t_stat,
                            t_pvalue=t_p, wilcoxon_statistic=w_stat, wilcoxon_pvalue=w_p,
                            confidence=est.confidence)


def format_number(value, digits: int = 4) -> str:
    """A table cell: floats to ``digits`` significant digits, None as "", the rest as str."""
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        return "nan" if math.isnan(value) else f"{value:.{digits}g}"
    return str(value)


def markdown_table(rows, columns=None, *, digits: int = 4) -> str:
    """``rows`` (dicts) as a GitHub markdown table over ``columns`` (default: the first row's keys).

    Floats are shown to ``digits`` significant digits; missing keys as empty cells.
    """
    rows = list(rows)
    if columns is None:
        columns = list(rows[0]) if rows else []
    columns = list(columns)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [format_number(row.get(c), digits).replace("|", "\\|") for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


__all__ = ["CI_METHODS", "Estimate", "PairedComparison", "format_number", "markdown_table",
           "mean_ci", "paired_difference"]
