"""Statistics over seeds, on scipy.stats: confidence intervals and paired comparisons.

* :func:`mean_ci` — the mean of a metric over seeds with a confidence interval: Student's t
  (default) or a seeded bootstrap (``scipy.stats.bootstrap``, BCa).
* :func:`paired_difference` — two conditions run on the same seeds (same initial weights and
  minibatches): the mean difference a - b with its t-interval, the paired t-test, the
  Wilcoxon signed-rank test, the number of pairs and the effect size Cohen's d_z
  (mean difference / standard deviation of the differences, ddof=1).
* :func:`paired_estimate` — the registered protocol's estimate of an effect over paired
  seeds (``paper_checks/PROTOCOL.md``, section Statistics): the mean with a standard error
  that adds the test-set sampling error to the spread over seeds, SE = sqrt(SE_seeds^2 +
  SE_test^2), and Student-t intervals, one-sided bounds and p-values with n - 1 degrees of freedom
  (:class:`PairedEstimate`).
* :func:`combination_variance` — the test-set sampling variance of one seed's effect value,
  a linear combination of runs' mean per-item errors on the same test items.
* :func:`shared_test_variance` — the test-set sampling variance of a mean effect over seeds
  evaluated on ONE shared test set, from the seeds x items table of per-item contrasts
  (a two-way random-effects decomposition: the within-seed item noise is counted once).
* :func:`paired_binary_exact` — two binary outcomes paired by seed (e.g. "diverged"): the
  exact conditional (McNemar) one-sided p-values on the discordant seeds, one per
  direction, and the smallest each can reach (for Tarone's pruning of a family).
* :func:`paired_bootstrap` — a paired bootstrap of an effect's mean over seeds with a
  normal draw for the shared test set's sampling error, from a generator seeded by a seed
  and a name (the same interval on every machine): :class:`PairedBootstrap`.
* :func:`binomial_p`, :func:`clopper_pearson` — an exact binomial tail p-value against a
  stated rate, and the Clopper-Pearson interval of a count.
* :func:`holm` — Holm's step-down levels and rejections over a claim's parts.
* :func:`tost` — two one-sided tests: is an effect inside (-margin, margin)?
* :func:`markdown_table` — rows of dicts as a GitHub markdown table.

Results are frozen dataclasses; a statistic that is undefined for the data (an interval
from one seed, a test on differences that are all zero) is NaN, never an exception or a
made-up number.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from stepsim._ground.validate import check_choice, check_open_unit, check_real

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
class MeanCI:
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

    def __str__(self):
        return f"{self.mean:.4g} [{self.low:.4g}, {self.high:.4g}] (n={self.n})"


def mean_ci(values, *, confidence: float = 0.95, method: str = "t", n_resamples: int = 9999,
            rng=None) -> MeanCI:
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
    MeanCI
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
        half = t_ppf(0.5 + confidence / 2, n - 1) * std / math.sqrt(n)  # t.ppf's bits
        low, high = mean - half, mean + half
    else:
        rng = np.random.default_rng(rng)
        res = stats.bootstrap((x,), np.mean, confidence_level=confidence,
                              n_resamples=int(n_resamples), method="BCa", rng=rng)
        low, high = res.confidence_interval
    return MeanCI(n=n, mean=mean, std=std, low=float(low), high=float(high),
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


def _t_sf(t: float, df: int) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom: ``scipy.special.stdtr(df,
    -t)``, the very function ``scipy.stats.t.sf`` evaluates (same bits), without the
    distribution method's argument handling, slower than the function itself."""
    from scipy import special

    return float(special.stdtr(df, -t))


@functools.lru_cache(maxsize=4096)
def t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom: for 0 < q < 1 and
    df > 0, ``scipy.special.stdtrit(df, q)``, the very function ``scipy.stats.t.ppf``
    evaluates there (same bits: ppf returns it times scale 1 plus loc 0, and so does this),
    without the distribution method's argument handling, slower than the function (a
    Welch-Satterthwaite df is a new float in nearly every call, so the cache rarely hits);
    elsewhere ``scipy.stats.t.ppf`` itself. Cached: integer dfs recur in every claim."""
    if 0.0 < q < 1.0 and df > 0.0:
        from scipy import special

        return float(special.stdtrit(df, q) * 1.0 + 0.0)
    from scipy import stats

    return float(stats.t.ppf(q, df))


@dataclasses.dataclass(frozen=True)
class PairedEstimate:
    """An effect's mean over n paired seeds with a standard error that includes the
    test-set sampling error (PROTOCOL.md, section Statistics).

    Attributes (all in the units of the effect, e.g. accuracy points or nats)
    ----------
    n : int
        Number of paired values (seeds), >= 1.
    mean : float
        Mean of the n values.
    se : float
        sqrt(se_seeds**2 + se_test**2): the standard error of ``mean``; NaN for n = 1.
    se_seeds : float
        sd(values, ddof=1) / sqrt(n): the spread over seeds; NaN for n = 1.
    se_test : float
        sqrt(mean(test_vars) / n): the test-set sampling error of the mean, treating the
        seeds' test-set errors as independent; 0.0 when no test variances were given.
    df : float
        The degrees of freedom of every t quantile and p-value: n - 1, or with a shared
        test set the Welch-Satterthwaite value se^4 / (se_seeds^4 / (n - 1) + se_test^4 /
        test_df) (the test variance is estimated from test_df + 1 items, so it is nearly
        known and the interval is not as wide as n - 1 would make it).

    Intervals and p-values are Student t with ``df`` degrees of freedom. n < 2 (or a
    non-finite se) gives NaN for all of them. se == 0 (values without spread and no test
    variances) gives a point interval and p-values of 0 or 1 by sign: that is reachable
    only through ``paired_estimate(values, test_vars=None)``; the protocol always passes
    ``test_vars``, so a zero spread over seeds never gives a point interval there.
    """

    n: int
    mean: float
    se: float
    se_seeds: float
    se_test: float
    df: float

    def _undefined(self) -> bool:
        return self.n < 2 or not math.isfinite(self.se)

    def interval(self, level: float) -> tuple[float, float]:
        """Two-sided Student-t interval mean -+ t_{(1+level)/2, df} * se at coverage
        ``level`` in (0, 1); (nan, nan) if n < 2 or se is not finite; a point if se == 0."""
        level = check_open_unit("level", level)
        if self._undefined():
            return math.nan, math.nan
        if self.se == 0.0:
            return self.mean, self.mean
        half = t_ppf(0.5 + level / 2, self.df) * self.se
        return self.mean - half, self.mean + half

    def lower_bound(self, alpha: float) -> float:
        """One-sided lower confidence bound at level 1 - ``alpha``: mean - t_{1-alpha,df} * se
        (= the lower end of the (1 - 2 alpha) two-sided interval); NaN if undefined."""
        alpha = check_open_unit("alpha", alpha)
        if self._undefined():
            return math.nan
        if self.se == 0.0:
            return self.mean
        return self.mean - t_ppf(1.0 - alpha, self.df) * self.se

    def p_greater(self, value: float) -> float:
        """One-sided p-value of H0: effect <= ``value`` (small p: the effect is above
        ``value``): P(T_df >= (mean - value) / se). NaN if undefined; 0 or 1 if se == 0."""
        value = check_real("value", value)
        if self._undefined():
            return math.nan
        if self.se == 0.0:
            return 0.0 if self.mean > value else 1.0
        return _t_sf((self.mean - value) / self.se, self.df)

    def p_less(self, value: float) -> float:
        """One-sided p-value of H0: effect >= ``value`` (small p: the effect is below
        ``value``): P(T_df <= (mean - value) / se). NaN if undefined; 0 or 1 if se == 0."""
        value = check_real("value", value)
        if self._undefined():
            return math.nan
        if self.se == 0.0:
            return 0.0 if self.mean < value else 1.0
        return _t_sf((value - self.mean) / self.se, self.df)


def paired_estimate(values, test_vars=None, *, shared_test_var=None,
                    test_df=None) -> PairedEstimate:
    """The protocol's estimate of an effect from its per-seed values (PROTOCOL.md,
    section Statistics).

    Parameters
    ----------
    values : array_like, shape (n,)
        One finite effect value per seed (e.g. a paired difference of test errors, in
        points or nats).
    test_vars : array_like, shape (n,), or None
        Per seed, the test-set sampling variance of that seed's value (units squared,
        >= 0; e.g. :func:`combination_variance`), or None for no test-set error.
        Use it when each seed is evaluated on its own test set.
    shared_test_var : float or None
        When every seed is evaluated on the SAME test set, its sampling error is common to
        the seeds and does not average out: the test-set sampling variance of the mean
        effect itself (units squared, >= 0; :func:`combination_variance` of the
        seed-averaged per-item contrast). se_test = sqrt(shared_test_var). Exclusive with
        ``test_vars``; se == 0 is then allowed (every run agrees on every test item: the
        effect is exactly its value).
    test_df : float or None
        Degrees of freedom of ``shared_test_var`` (N_test - 1); None: known exactly.

    Returns
    -------
    PairedEstimate
        mean, se = sqrt(se_seeds^2 + se_test^2) with se_seeds = sd(values, ddof=1)/sqrt(n)
        and se_test = sqrt(mean(test_vars)/n), df = n - 1. n = 1: se_seeds and se are NaN.

    Raises
    ------
    ValueError
        Non-finite or empty values; test_vars of another length, negative or non-finite;
        test_vars given but se == 0 (no spread and every test variance 0: a point
        interval the protocol does not allow; pass test_vars=None to accept it).
    """
    x = _sample("values", values)
    n = int(x.size)
    mean = math.fsum(x.tolist()) / n
    se_seeds = float(np.std(x, ddof=1)) / math.sqrt(n) if n > 1 else math.nan
    if shared_test_var is not None:
        if test_vars is not None:
            raise ValueError("give test_vars (one test set per seed) or shared_test_var "
                             "(one test set for all seeds), not both")
        shared = float(shared_test_var)
        if not (math.isfinite(shared) and shared >= 0):
            raise ValueError(f"shared_test_var must be finite and >= 0, got {shared_test_var!r}")
        se_test = math.sqrt(shared)
    elif test_vars is None:
        se_test = 0.0
    else:
        v = _sample("test_vars", test_vars)
        if v.shape != x.shape:
            raise ValueError(f"test_vars must have one variance per value: got {v.size} "
                             f"test_vars for {n} values")
        if np.any(v < 0):
            raise ValueError(f"test_vars must be >= 0 (variances), got {v[v < 0][:5].tolist()}")
        se_test = math.sqrt(math.fsum(v.tolist()) / n / n)
    se = math.sqrt(se_seeds * se_seeds + se_test * se_test)
    if se == 0.0 and test_vars is not None:
        raise ValueError("test_vars are all 0 and the values have no spread over seeds: "
                         "se = 0 would give a point interval; check the test variances "
                         "(or pass test_vars=None to accept a point interval)")
    df = n - 1
    if shared_test_var is not None and n > 1 and se > 0:
        tail = se_seeds ** 4 / (n - 1) + (0.0 if test_df is None else se_test ** 4 / test_df)
        df = math.inf if tail == 0 else se ** 4 / tail
        df = min(df, 1e9)  # a known variance: the normal limit, kept finite for scipy
    return PairedEstimate(n=n, mean=mean, se=se, se_seeds=se_seeds, se_test=se_test, df=df)


def combination_variance(item_values, coefficients) -> float:
    """Test-set sampling variance of sum_j c_j mean(x_j) over the same N test items.

    Parameters
    ----------
    item_values : array_like, shape (k, N)
        Per-item values x_j[item] of k runs of ONE seed, evaluated on the SAME N >= 2 test
        items (e.g. 100.0 per misclassified image, or a test sequence's mean loss).
    coefficients : array_like, shape (k,)
        The linear combination c that forms the seed's effect value, e.g. gap_Adam -
        gap_SGDM = e1 - e2 - e3 + e4 -> (1, -1, -1, 1).

    Returns
    -------
    float
        var_items(sum_j c_j x_j[item], ddof=1) / N, in the values' units squared. For two
        0/1 runs (c = (1, -1)) with n01 + n10 discordant items and mean difference m this is
        ((n01 + n10)/N - m^2) / (N - 1) ~ (n01 + n10) / N^2.
    """
    raw = np.asarray(item_values) if not isinstance(item_values, (str, bytes, dict)) else None
    if raw is None or raw.dtype.kind not in "iufb":
        raise TypeError(f"item_values must be an array of real numbers of shape (k, N), "
                        f"got {type(item_values).__name__}")
    x = raw.astype(np.float64)
    if x.ndim != 2:
        raise ValueError(f"item_values must be 2-d (k runs, N items), got shape {x.shape}")
    k, n_items = x.shape
    if k == 0 or n_items < 2:
        raise ValueError(f"item_values needs k >= 1 runs and N >= 2 items, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("item_values has non-finite values")
    c = _sample("coefficients", coefficients)
    if c.size != k:
        raise ValueError(f"coefficients must have one entry per run: got {c.size} "
                         f"coefficients for {k} runs of item_values")
    z = c[0] * x[0]
    for j in range(1, k):  # elementwise, in a fixed order: the same bits on every CPU
        z = z + c[j] * x[j]
    mean = math.fsum(z.tolist()) / n_items
    dev = z - mean
    return math.fsum((dev * dev).tolist()) / (n_items - 1) / n_items


def _ordered_sum(x: np.ndarray, width: int = 128) -> float:
    """Sum of a 1-d float64 array in a fixed order (the same bits on every CPU, unlike
    NumPy's reductions, whose order may follow the SIMD path): blocks of ``width`` added
    elementwise one after the other, then ``math.fsum`` of the ``width`` partial sums."""
    x = np.ascontiguousarray(x, dtype=np.float64).ravel()
    pad = (-x.size) % width
    if pad:
        x = np.concatenate([x, np.zeros(pad)])
    rows = x.reshape(-1, width)
    # acc = rows[0] + rows[1] + ... one row after the other: ``accumulate`` is defined as
    # that sequence of elementwise sums (out[i] = out[i-1] + rows[i]), so its last row has
    # the bits of the explicit loop without a Python iteration per row
    acc = np.add.accumulate(rows, axis=0)[-1]
    return math.fsum(acc.tolist())


def shared_test_variance(contrasts) -> tuple[float, float]:
    """Test-set sampling variance of the mean effect over seeds that share ONE test set,
    without counting the within-seed item noise twice (PROTOCOL.md, "Draft 4: statistics").

    Parameters
    ----------
    contrasts : array_like, shape (n, N)
        z[s, i] = sum_j c_j x_j[s, i]: seed s's per-item contrast on test item i (the
        seed's effect value is mean_i z[s, i]); n >= 1 seeds, N >= 2 items, finite.

    Returns
    -------
    (variance, df)
        Model z[s, i] = mu + a_s + b_i + (ab)_si (seeds x items crossed, one observation
        per cell). The mean effect's variance is s_a^2 / n + s_b^2 / N + s_ab^2 / (n N).
        The spread of the seeds' values, sd(values)^2 / n, already estimates
        s_a^2 / n + s_ab^2 / (n N) (it is MS_seeds / (n N)); this function returns the rest,
        s_b^2 / N = (MS_items - MS_res) / (n N), truncated at 0, with its Satterthwaite
        degrees of freedom (MS_items - MS_res)^2 / (MS_items^2 / (N - 1) + MS_res^2 /
        ((n - 1)(N - 1))). Then sd(values)^2 / n + variance = (MS_seeds + MS_items -
        MS_res) / (n N), and ``paired_estimate``'s Welch-Satterthwaite df over the two
        parts equals the Satterthwaite df of that sum of mean squares. The earlier
        variance, var_items(mean_s z) / N = MS_items / (n N), counted s_ab^2 / (n N) a
        second time. n = 1: no decomposition (MS_res undefined); var_items(z) / N with
        N - 1 df. Sums run in a fixed order (``_ordered_sum``): the same bits on every CPU.
    """
    raw = np.asarray(contrasts) if not isinstance(contrasts, (str, bytes, dict)) else None
    if raw is None or raw.dtype.kind not in "iufb":
        raise TypeError(f"contrasts must be an array of real numbers of shape (n, N), "
                        f"got {type(contrasts).__name__}")
    z = raw.astype(np.float64)
    if z.ndim != 2 or z.shape[0] < 1 or z.shape[1] < 2:
        raise ValueError(f"contrasts must have shape (n >= 1 seeds, N >= 2 items), "
                         f"got {z.shape}")
    if not np.all(np.isfinite(z)):
        raise ValueError("contrasts has non-finite values")
    n, n_items = z.shape
    grand = _ordered_sum(z.ravel()) / (n * n_items)
    item_sums = z[0]
    for s in range(1, n):  # elementwise, in a fixed order: the same bits on every CPU
        item_sums = item_sums + z[s]
    item_means = item_sums / n
    dev = item_means - grand
    ms_items = n * _ordered_sum(dev * dev) / (n_items - 1)
    if n == 1:
        return ms_items / n_items, float(n_items - 1)
    seed_means = np.array([_ordered_sum(row) for row in z]) / n_items
    res = z - seed_means[:, None] - item_means[None, :] + grand
    df_res = (n - 1) * (n_items - 1)
    ms_res = _ordered_sum((res * res).ravel()) / df_res
    diff = ms_items - ms_res
    if diff <= 0.0:
        return 0.0, float(n_items - 1)
    df = diff * diff / (ms_items * ms_items / (n_items - 1) + ms_res * ms_res / df_res)
    return diff / (n * n_items), float(df)


def _binom_sf_half(k: int, d: int) -> float:
    """P(Bin(d, 1/2) >= k), exact (integer sums), for 0 <= k, d."""
    if k <= 0:
        return 1.0
    if k > d:
        return 0.0
    return sum(math.comb(d, j) for j in range(k, d + 1)) / 2 ** d


@dataclasses.dataclass(frozen=True)
class PairedBinary:
    """Two binary outcomes A, B (e.g. "this side's run diverged") over n paired seeds.

    only_a, only_b: seeds where only A (only B) happened; both, neither: the rest.
    p_a_more: exact one-sided p of H0 "A happens no more often than B" (McNemar's
    conditional test: P(Bin(only_a + only_b, 1/2) >= only_a)); p_b_more likewise;
    p_two_sided = min(1, 2 min(p_a_more, p_b_more)); p_min: the smallest two-sided p
    these discordant counts could give, min(1, 2 / 2^(only_a + only_b));
    :attr:`p_min_one_sided` the smallest one-sided p, 2^-(only_a + only_b).
    """

    n: int
    only_a: int
    only_b: int
    both: int
    neither: int
    p_a_more: float
    p_b_more: float
    p_two_sided: float
    p_min: float

    @property
    def p_min_one_sided(self) -> float:
        """The smallest p either one-sided test can give with these discordant seeds
        (all of them one way): 2^-(only_a + only_b); 1.0 with none."""
        return 1.0 / 2 ** (self.only_a + self.only_b)


def paired_binary_exact(a, b) -> PairedBinary:
    """Exact conditional (McNemar) comparison of two binary outcomes paired by seed.

    a, b : array_like of bool, shape (n,), paired by position. Conditional on the number
    of discordant seeds d, only_a ~ Bin(d, q) with q = P(only A) / P(only A or only B),
    and q <= 1/2 exactly when P(A) <= P(B): the binomial tail at 1/2 is an exact (and
    conservative, being discrete) p-value whatever the dependence of A and B within a seed.
    """
    x = np.asarray(a)
    y = np.asarray(b)
    if x.dtype.kind not in "bui" or y.dtype.kind not in "bui":
        raise TypeError("a and b must be arrays of booleans (one per seed)")
    x, y = x.astype(bool), y.astype(bool)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"a and b must be 1-d of one length, got {x.shape} and {y.shape}")
    only_a, only_b = int(np.sum(x & ~y)), int(np.sum(~x & y))
    d = only_a + only_b
    p_a, p_b = _binom_sf_half(only_a, d), _binom_sf_half(only_b, d)
    return PairedBinary(n=int(x.size), only_a=only_a, only_b=only_b, both=int(np.sum(x & y)),
                        neither=int(np.sum(~x & ~y)), p_a_more=p_a, p_b_more=p_b,
                        p_two_sided=min(1.0, 2.0 * min(p_a, p_b)),
                        p_min=min(1.0, 2.0 / 2 ** d))


@dataclasses.dataclass(frozen=True, eq=False)
class PairedBootstrap:
    """The bootstrap distribution of an effect's mean over n paired seeds
    (:func:`paired_bootstrap`): ``draws``, sorted ascending, shape (resamples,), in the
    effect's units. Quantiles interpolate linearly between order statistics (the
    "linear" rule of ``numpy.quantile``, written out so the bits are fixed)."""

    n: int
    draws: np.ndarray

    def quantile(self, q: float) -> float:
        """The ``q`` quantile of the draws, q in [0, 1]."""
        q = check_real("q", q, minimum=0.0, maximum=1.0)
        h = (self.draws.size - 1) * q
        lo = math.floor(h)
        hi = min(lo + 1, self.draws.size - 1)
        a, b = float(self.draws[lo]), float(self.draws[hi])
        return a + (h - lo) * (b - a)

    def interval(self, level: float) -> tuple[float, float]:
        """The two-sided percentile interval at coverage ``level``."""
        level = check_open_unit("level", level)
        tail = (1.0 - level) / 2
        return self.quantile(tail), self.quantile(1.0 - tail)

    def lower_bound(self, alpha: float) -> float:
        """The one-sided lower percentile bound at level 1 - ``alpha``."""
        return self.quantile(check_open_unit("alpha", alpha))

    def upper_bound(self, alpha: float) -> float:
        """The one-sided upper percentile bound at level 1 - ``alpha``."""
        return self.quantile(1.0 - check_open_unit("alpha", alpha))


def bootstrap_generator(seed: int, name: str) -> np.random.Generator:
    """A generator seeded by ``seed`` and ``name`` (its UTF-8 SHA-256 as four 32-bit
    words): the same stream for the same pair on every machine and NumPy build."""
    import hashlib

    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    digest = hashlib.sha256(name.encode()).digest()
    words = [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), *words])))


def paired_bootstrap(values, *, se_test: float = 0.0, resamples: int = 20000, seed: int,
                     name: str) -> PairedBootstrap:
    """The paired bootstrap of an effect's mean (PROTOCOL.md, "Draft 5": intervals that
    hold on bimodal seeds).

    values : array_like, shape (n,), n >= 2
        One finite effect value per seed (the seeds' pairs are resampled whole: a value is
        already a paired contrast).
    se_test : float >= 0
        The test set's sampling standard error of the mean (units of the values): each
        resample's mean gets an independent normal draw with this standard deviation, as
        the seeds share one test set whose error no resampling of seeds can show.
    resamples : int >= 100
    seed, name : the generator's seed and the part's name (:func:`bootstrap_generator`).

    Each resample draws n seeds with replacement; its mean is summed over the n columns
    one after the other (a fixed order: the same bits on every CPU). Returns a
    :class:`PairedBootstrap` of the sorted resampled means.
    """
    x = _sample("values", values)
    if x.size < 2:
        raise ValueError(f"values: a bootstrap needs at least 2 seeds, got {x.size}")
    se_test = check_real("se_test", se_test, minimum=0.0)
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) \
            or resamples < 100:
        raise ValueError(f"resamples must be an integer >= 100, got {resamples!r}")
    rng = bootstrap_generator(seed, name)
    n = x.size
    picks = rng.integers(0, n, size=(int(resamples), n))
    total = x[picks[:, 0]]
    for j in range(1, n):  # elementwise, one column after the other
        total = total + x[picks[:, j]]
    means = total / n
    if se_test > 0:
        means = means + se_test * rng.standard_normal(int(resamples))
    return PairedBootstrap(n=n, draws=np.sort(means, kind="stable"))


def binomial_p(count: int, n: int, rate: float, *, greater: bool) -> float:
    """Exact binomial p-value of ``count`` successes in ``n`` against ``rate``:
    greater=True: H0 "true rate <= rate", P(Bin(n, rate) >= count); False: H0 "true rate
    >= rate", P(Bin(n, rate) <= count). p <= a exactly when the one-sided Clopper-Pearson
    bound at level 1 - a excludes ``rate``."""
    rate = check_real("rate", rate, minimum=0.0, maximum=1.0)
    if not (isinstance(count, (int, np.integer)) and isinstance(n, (int, np.integer))
            and 0 <= count <= n and n >= 1):
        raise ValueError(f"need integers 0 <= count <= n, n >= 1, got count={count!r}, n={n!r}")
    ks = range(count, n + 1) if greater else range(count + 1)
    return min(1.0, math.fsum(math.comb(n, k) * rate ** k * (1 - rate) ** (n - k) for k in ks))


def clopper_pearson(count, n: int, level: float = 0.95):
    """Two-sided exact Clopper-Pearson interval of a binomial rate at coverage ``level``:
    (low, high) for ``count`` successes out of ``n`` — floats for one count, arrays for an
    array of counts (Theorem 1's violations per lag). Equals
    ``scipy.stats.binomtest(count, n).proportion_ci(level, method="exact")``."""
    from scipy import stats

    level = check_open_unit("level", level)
    a = (1.0 - level) / 2
    k = np.asarray(count, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # the shapes at k = 0 and k = n are not used
        low = np.where(k > 0, stats.beta.ppf(a, k, n - k + 1), 0.0)
        high = np.where(k < n, stats.beta.ppf(1 - a, k + 1, n - k), 1.0)
    if k.ndim == 0:
        return float(low), float(high)
    return low, high


def holm(p_values, alpha: float = 0.05) -> list[tuple[float, bool]]:
    """Holm's step-down procedure at family-wise level ``alpha``.

    Parameters
    ----------
    p_values : sequence of float in [0, 1], length k (may be empty)
    alpha : float in (0, 1)

    Returns
    -------
    list of (level, rejected), one per input position
        Sort the p-values ascending (ties keep input order); the one of rank r = 0..k-1 gets
        the level alpha / (k - r) and is rejected iff p <= level and every smaller rank was
        rejected (after the first non-rejection, nothing later is rejected).
    """
    alpha = check_open_unit("alpha", alpha)
    if isinstance(p_values, (list, tuple, np.ndarray)) and len(p_values) == 0:
        return []
    arr = _sample("p_values", p_values)
    if np.any((arr < 0) | (arr > 1)):
        raise ValueError(f"p_values must be in [0, 1], got {arr.tolist()}")
    p = arr.tolist()
    k = len(p)
    order = sorted(range(k), key=lambda i: p[i])  # stable: ties keep input order
    out: list = [None] * k
    going = True
    for rank, i in enumerate(order):
        level = alpha / (k - rank)
        going = going and p[i] <= level
        out[i] = (level, going)
    return out


def tost(estimate: PairedEstimate, margin: float,
         alpha: float = 0.05) -> tuple[bool, float, float]:
    """Two one-sided tests of equivalence: is the effect inside (-margin, margin)?

    Returns (equivalent, low, high): [low, high] is the (1 - 2 alpha) two-sided t interval
    of ``estimate`` (units of the effect); equivalent iff -margin < low and high < margin
    (False when the interval is undefined). alpha must be in (0, 0.5), margin > 0.
    """
    if not isinstance(estimate, PairedEstimate):
        raise TypeError(f"estimate must be a PairedEstimate, got {type(estimate).__name__}")
    margin = check_real("margin", margin, minimum=0.0, min_open=True)
    alpha = check_real("alpha", alpha, minimum=0.0, maximum=0.5, min_open=True, max_open=True)
    low, high = estimate.interval(1.0 - 2.0 * alpha)
    return bool(-margin < low and high < margin), low, high


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


__all__ = ["CI_METHODS", "MeanCI", "PairedBinary", "PairedBootstrap", "PairedComparison",
           "PairedEstimate", "binomial_p", "bootstrap_generator", "clopper_pearson",
           "combination_variance", "format_number", "holm", "markdown_table", "mean_ci",
           "paired_binary_exact", "paired_bootstrap", "paired_difference", "paired_estimate",
           "shared_test_variance", "tost"]
