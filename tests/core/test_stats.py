"""stepsim.stats against textbook values, closed forms and scipy.stats."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from stepsim import stats

T_975_DF4 = 2.7764451051977987  # Student t quantile 0.975 at 4 degrees of freedom (tables)


def t_cdf_df4(t):
    """Closed form of Student's t CDF with 4 degrees of freedom (independent of scipy)."""
    x = t / math.sqrt(4 + t * t)
    return 0.5 + 0.75 * x - 0.25 * x ** 3


def half_width(est) -> float:
    return (est.high - est.low) / 2


def test_t_interval_of_one_to_five_is_the_textbook_one():
    est = stats.mean_ci([1, 2, 3, 4, 5])
    half = T_975_DF4 * math.sqrt(2.5) / math.sqrt(5)  # t * s / sqrt(n), s^2 = 2.5
    assert (est.n, est.mean, est.std) == (5, 3.0, pytest.approx(math.sqrt(2.5)))
    assert est.low == pytest.approx(3 - half, rel=1e-12)
    assert est.high == pytest.approx(3 + half, rel=1e-12)
    assert (est.low, est.high) == pytest.approx(
        sps.t.interval(0.95, 4, loc=3, scale=math.sqrt(2.5 / 5)), rel=1e-14)
    # a 99% interval is wider, a 50% one narrower, all centred on the mean
    wide, narrow = stats.mean_ci([1, 2, 3, 4, 5], confidence=0.99), stats.mean_ci(
        [1, 2, 3, 4, 5], confidence=0.5)
    assert half_width(narrow) < half_width(est) < half_width(wide)


def test_undefined_and_degenerate_intervals_are_nan_or_a_point():
    one = stats.mean_ci([4.2])
    assert one.n == 1 and one.mean == 4.2 and math.isnan(one.low) and math.isnan(one.std)
    flat = stats.mean_ci([2.0, 2.0, 2.0], method="bootstrap")
    assert (flat.low, flat.mean, flat.high) == (2.0, 2.0, 2.0)


def test_bootstrap_is_scipys_seeded_bca_and_agrees_with_t_on_a_large_sample():
    x = np.random.default_rng(5).normal(10.0, 2.0, size=400)
    est = stats.mean_ci(x, method="bootstrap", n_resamples=2000, rng=11)
    ref = sps.bootstrap((x,), np.mean, n_resamples=2000, method="BCa",
                        rng=np.random.default_rng(11)).confidence_interval
    assert (est.low, est.high) == (ref.low, ref.high)
    assert est == stats.mean_ci(x, method="bootstrap", n_resamples=2000, rng=11)  # seeded
    t = stats.mean_ci(x)
    # both estimate 1.96 * 2 / sqrt(400) ~ 0.196: BCa and t agree to a few percent at n = 400
    assert half_width(est) == pytest.approx(half_width(t), rel=0.1)
    assert half_width(t) == pytest.approx(1.966 * x.std(ddof=1) / 20, rel=1e-3)


def test_paired_difference_known_answers():
    b = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    a = 2 * b  # d = a - b = 1..5: mean 3, sd sqrt(2.5)
    res = stats.paired_difference(a, b)
    t = 3 / math.sqrt(2.5 / 5)
    assert res.n == 5
    assert res.mean_diff == 3.0
    assert res.std_diff == pytest.approx(math.sqrt(2.5))
    assert res.cohen_dz == pytest.approx(3 / math.sqrt(2.5), rel=1e-12)  # 1.897...
    assert res.t_statistic == pytest.approx(t, rel=1e-12)  # 4.2426...
    assert res.t_pvalue == pytest.approx(2 * (1 - t_cdf_df4(t)), rel=1e-9)  # 0.013236
    assert (res.low, res.high) == pytest.approx((3 - T_975_DF4 * math.sqrt(0.5),
                                                 3 + T_975_DF4 * math.sqrt(0.5)), rel=1e-12)
    # Wilcoxon: all 5 differences positive -> W- = 0, exact two-sided p = 2 / 2^5
    assert res.wilcoxon_statistic == 0.0
    assert res.wilcoxon_pvalue == 2 / 32
    ref_t, ref_w = sps.ttest_rel(a, b), sps.wilcoxon(a, b)
    assert (res.t_statistic, res.t_pvalue) == (ref_t.statistic, ref_t.pvalue)
    assert (res.wilcoxon_statistic, res.wilcoxon_pvalue) == (ref_w.statistic, ref_w.pvalue)
    # swapping the arguments flips the sign, not the evidence
    flipped = stats.paired_difference(b, a)
    assert flipped.mean_diff == -3.0 and flipped.cohen_dz == -res.cohen_dz
    assert flipped.t_pvalue == pytest.approx(res.t_pvalue)


def test_paired_difference_with_constant_or_zero_differences():
    same = stats.paired_difference([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert same.mean_diff == 0 and math.isnan(same.cohen_dz) and math.isnan(same.t_pvalue)
    assert math.isnan(same.wilcoxon_pvalue)
    shifted = stats.paired_difference([2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 3.0, 4.0])
    assert shifted.cohen_dz == math.inf and shifted.t_pvalue == 0.0
    assert shifted.wilcoxon_pvalue == 2 / 16


@pytest.mark.parametrize("call, match", [
    (lambda: stats.mean_ci([]), "values is empty"),
    (lambda: stats.mean_ci([1.0, math.nan]), "values has non-finite"),
    (lambda: stats.mean_ci([[1.0, 2.0]]), "values must be 1-d"),
    (lambda: stats.mean_ci([1.0, 2.0], confidence=1.0), "confidence"),
    (lambda: stats.mean_ci([1.0, 2.0], method="jackknife"), "unknown method 'jackknife'"),
    (lambda: stats.paired_difference([1.0, 2.0], [1.0]), "pair up one to one"),
    (lambda: stats.paired_difference([1.0], [2.0]), "at least 2 pairs"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_markdown_table():
    text = stats.markdown_table([{"recipe": "step", "mean": 0.0123456, "n": 5},
                                 {"recipe": "a|b", "mean": math.nan}])
    assert text.splitlines() == ["| recipe | mean | n |", "|---|---|---|",
                                 "| step | 0.01235 | 5 |", "| a\\|b | nan |  |"]


# --- the registered protocol (PROTOCOL.md §6): paired_estimate, combination_variance,
# holm, tost --------------------------------------------------------------------------

def test_paired_estimate_adds_the_test_error_to_the_seed_spread():
    est = stats.paired_estimate([1, 2, 3, 4, 5], [0.5] * 5)
    # se_seeds = sqrt(2.5 / 5), se_test = sqrt(0.5 / 5), se = sqrt(0.5 + 0.1)
    assert (est.n, est.mean, est.df) == (5, 3.0, 4)
    assert est.se_seeds == pytest.approx(math.sqrt(0.5), rel=1e-14)
    assert est.se_test == pytest.approx(math.sqrt(0.1), rel=1e-14)
    assert est.se == pytest.approx(math.sqrt(0.6), rel=1e-14)
    half = T_975_DF4 * math.sqrt(0.6)
    assert est.interval(0.95) == pytest.approx((3 - half, 3 + half), rel=1e-12)
    assert est.lower_bound(0.025) == pytest.approx(3 - half, rel=1e-12)
    t = 3 / math.sqrt(0.6)
    assert est.p_greater(0.0) == pytest.approx(1 - t_cdf_df4(t), rel=1e-9)
    assert est.p_less(0.0) == pytest.approx(t_cdf_df4(t), rel=1e-12)
    t_m = (3 - 4.5) / math.sqrt(0.6)
    assert est.p_less(4.5) == pytest.approx(t_cdf_df4(t_m), rel=1e-9)
    assert est.p_greater(4.5) + est.p_less(4.5) == pytest.approx(1.0, rel=1e-14)
    # the p-value and the interval agree: p_greater(low end of the 90% interval) = 0.05
    low90 = est.interval(0.90)[0]
    assert est.p_greater(low90) == pytest.approx(0.05, rel=1e-9)
    assert est.lower_bound(0.05) == pytest.approx(low90, rel=1e-12)


def test_paired_estimate_without_test_error_is_the_one_sample_t_test():
    x = np.random.default_rng(3).normal(0.4, 1.0, size=8)
    est = stats.paired_estimate(x)
    assert est.se_test == 0.0 and est.se == est.se_seeds
    assert est.p_greater(0.0) == pytest.approx(
        sps.ttest_1samp(x, 0.0, alternative="greater").pvalue, rel=1e-10)
    assert est.p_less(0.25) == pytest.approx(
        sps.ttest_1samp(x, 0.25, alternative="less").pvalue, rel=1e-10)
    ref = stats.mean_ci(x, confidence=0.9)
    assert est.interval(0.9) == pytest.approx((ref.low, ref.high), rel=1e-12)


def test_paired_estimate_degenerate_cases():
    one = stats.paired_estimate([2.0], [0.3])
    assert one.n == 1 and one.df == 0 and math.isnan(one.se_seeds) and math.isnan(one.se)
    assert all(math.isnan(v) for v in one.interval(0.95))
    assert math.isnan(one.lower_bound(0.05)) and math.isnan(one.p_greater(0.0))
    assert math.isnan(one.p_less(0.0))
    # no spread, no test error given: a point interval, p-values 0 or 1 by sign
    flat = stats.paired_estimate([1.5, 1.5, 1.5])
    assert flat.se == 0.0 and flat.interval(0.95) == (1.5, 1.5)
    assert (flat.p_greater(0.0), flat.p_less(0.0), flat.p_greater(2.0), flat.p_less(2.0)) == (
        0.0, 1.0, 1.0, 0.0)
    assert flat.lower_bound(0.05) == 1.5
    # no spread with test variances (the protocol's case): a real interval from se_test
    noisy = stats.paired_estimate([1.5, 1.5, 1.5, 1.5], [0.16] * 4)
    assert noisy.se_seeds == 0.0 and noisy.se == pytest.approx(0.2, rel=1e-14)
    assert noisy.interval(0.95) == pytest.approx(
        sps.t.interval(0.95, 3, loc=1.5, scale=0.2), rel=1e-12)
    # mean(test_vars) is used: uneven variances count by their average
    assert stats.paired_estimate([1.0, 2.0], [0.1, 0.3]).se_test == pytest.approx(
        math.sqrt(0.2 / 2), rel=1e-14)


@pytest.mark.parametrize("call, error, match", [
    (lambda: stats.paired_estimate([1.0, math.nan]), ValueError, "values has non-finite"),
    (lambda: stats.paired_estimate([]), ValueError, "values is empty"),
    (lambda: stats.paired_estimate("1, 2"), TypeError, "values must be"),
    (lambda: stats.paired_estimate([1.0, 2.0], [0.1]), ValueError, "test_vars must have one"),
    (lambda: stats.paired_estimate([1.0, 2.0], [0.1, -0.1]), ValueError, "test_vars must be >= 0"),
    (lambda: stats.paired_estimate([1.0, 2.0], [0.1, math.inf]), ValueError,
     "test_vars has non-finite"),
    (lambda: stats.paired_estimate([1.0, 1.0], [0.0, 0.0]), ValueError, "point interval"),
    (lambda: stats.paired_estimate([1.0, 2.0]).interval(1.0), ValueError, "level"),
    (lambda: stats.paired_estimate([1.0, 2.0]).lower_bound(0.0), ValueError, "alpha"),
    (lambda: stats.paired_estimate([1.0, 2.0]).p_greater(math.nan), ValueError, "value"),
    (lambda: stats.combination_variance([1.0, 0.0, 1.0], [1.0]), ValueError, "2-d"),
    (lambda: stats.combination_variance([[1.0, 0.0]] * 2, [1.0]), ValueError,
     "one entry per run"),
    (lambda: stats.combination_variance([[1.0], [0.0]], [1.0, -1.0]), ValueError, "N >= 2"),
    (lambda: stats.combination_variance([[1.0, math.nan]], [1.0]), ValueError, "non-finite"),
    (lambda: stats.combination_variance([[1.0, 0.0]], [math.nan]), ValueError,
     "coefficients has non-finite"),
    (lambda: stats.combination_variance("ab", [1.0]), TypeError, "item_values"),
    (lambda: stats.holm([0.01, math.nan]), ValueError, "p_values has non-finite"),
    (lambda: stats.holm([0.01, 1.5]), ValueError, r"p_values must be in \[0, 1\]"),
    (lambda: stats.holm([0.01], alpha=1.0), ValueError, "alpha"),
    (lambda: stats.tost(stats.paired_estimate([1.0, 2.0]), 0.0), ValueError, "margin"),
    (lambda: stats.tost(stats.paired_estimate([1.0, 2.0]), -1.0), ValueError, "margin"),
    (lambda: stats.tost(stats.paired_estimate([1.0, 2.0]), 1.0, alpha=0.5), ValueError, "alpha"),
    (lambda: stats.tost((1.0, 0.1), 1.0), TypeError, "PairedEstimate"),
])
def test_protocol_statistics_refuse_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_combination_variance_of_two_zero_one_runs_is_the_discordance():
    # hand example, N = 10: z = x1 - x2 = [0, 1, -1, -1, 0, 0, 0, 0, 0, 1]: n10 = 2, n01 = 2
    x1 = [1, 1, 0, 0, 0, 0, 0, 0, 0, 1]
    x2 = [1, 0, 1, 1, 0, 0, 0, 0, 0, 0]
    assert stats.combination_variance([x1, x2], [1, -1]) == pytest.approx(4 / 9 / 10, rel=1e-14)
    # in points (100 per wrong image) the variance scales by 100^2
    assert stats.combination_variance(100 * np.array([x1, x2]), [1, -1]) == pytest.approx(
        4 / 9 / 10 * 1e4, rel=1e-14)
    # random runs: exactly ((n01 + n10)/N - m^2)/(N - 1), ~ (n01 + n10)/N^2 for large N
    rng = np.random.default_rng(7)
    n_items = 20000
    a = (rng.random(n_items) < 0.10).astype(float)
    b = np.where(rng.random(n_items) < 0.7, a, (rng.random(n_items) < 0.12).astype(float))
    n10, n01 = int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1)))
    m = (n10 - n01) / n_items
    got = stats.combination_variance(np.stack([a, b]), [1.0, -1.0])
    assert got == pytest.approx(((n01 + n10) / n_items - m * m) / (n_items - 1), rel=1e-12)
    assert got == pytest.approx((n01 + n10) / n_items ** 2, rel=2e-3)


def test_combination_variance_of_a_four_run_contrast_is_numpys():
    x = np.random.default_rng(11).normal(size=(4, 500))
    c = np.array([1.0, -1.0, -1.0, 1.0])  # gap_Adam - gap_SGDM = e1 - e2 - e3 + e4
    z = x[0] - x[1] - x[2] + x[3]
    assert stats.combination_variance(x, c) == pytest.approx(np.var(z, ddof=1) / 500, rel=1e-12)
    # one run, coefficient 1: the squared standard error of its mean
    assert stats.combination_variance(x[:1], [1.0]) == pytest.approx(
        sps.sem(x[0]) ** 2, rel=1e-12)


def _holm_reference(p, alpha):
    """Holm from the textbook, by adjusted p-values: p_adj(r) = max_{s<=r} (k - s) p_(s)."""
    k = len(p)
    order = np.argsort(p, kind="stable")
    adjusted, running = np.empty(k), 0.0
    for rank, i in enumerate(order):
        running = max(running, (k - rank) * p[i])
        adjusted[i] = min(1.0, running)
    return adjusted <= alpha


def test_holm_step_down():
    # sorted: 0.005 (level 0.0125, rejected), 0.01 (0.05/3, rejected), 0.03 (0.025, not
    # rejected: stop), 0.04 (level 0.05: below its level, but after the stop, not rejected)
    out = stats.holm([0.01, 0.04, 0.03, 0.005])
    assert out == [(pytest.approx(0.05 / 3), True), (0.05, False), (0.025, False),
                   (0.0125, True)]
    # ties keep input order: the first gets the stricter level
    assert stats.holm([0.02, 0.02]) == [(0.025, True), (0.05, True)]
    assert stats.holm([0.03, 0.03]) == [(0.025, False), (0.05, False)]
    assert stats.holm([0.04]) == [(0.05, True)]
    assert stats.holm([0.04], alpha=0.01) == [(0.01, False)]
    assert stats.holm([]) == []
    # against the adjusted-p formulation on random p-values
    rng = np.random.default_rng(1)
    for _ in range(200):
        p = rng.random(int(rng.integers(1, 8))) ** 3
        assert [r for _, r in stats.holm(p)] == _holm_reference(p, 0.05).tolist()


def test_tost_is_the_90_percent_interval_inside_the_margins():
    est = stats.paired_estimate([0.1, -0.2, 0.3, 0.0, 0.1, 0.2, -0.1, 0.0], [0.01] * 8)
    eq, low, high = stats.tost(est, 0.5)
    assert (low, high) == est.interval(0.90)
    assert eq and -0.5 < low < high < 0.5
    # the TOST p-value max(P(E <= -m), P(E >= m)) <= alpha exactly when the interval fits
    p = max(est.p_greater(-0.5), est.p_less(0.5))
    assert p < 0.05
    margin = max(-low, high)  # the interval's end touches the margin: p = alpha
    assert max(est.p_greater(-margin), est.p_less(margin)) == pytest.approx(0.05, rel=1e-9)
    assert not stats.tost(est, margin)[0]  # open interval: touching is not inside
    assert not stats.tost(est, 0.1)[0]
    assert stats.tost(est, 0.5, alpha=0.01)[1:] == est.interval(0.98)
    assert not stats.tost(stats.paired_estimate([0.1]), 0.5)[0]  # n = 1: no interval


def test_t_tail_is_scipys():
    t = np.random.default_rng(2).normal(scale=4, size=50).tolist() + [0.0, math.inf, -math.inf]
    for df in (1, 4, 7, 30):
        assert [stats._t_sf(x, df) for x in t] == sps.t.sf(t, df).tolist()
        for q in (0.5, 0.9, 0.975, 1 - 0.05 / 6):
            assert stats.t_ppf(q, df) == sps.t.ppf(q, df)
    # the quantile's fast path (scipy.special.stdtrit) gives scipy.stats.t.ppf's bits, also
    # at the Welch-Satterthwaite dfs the verdicts use (new floats), and at the edges
    rng = np.random.default_rng(3)
    dfs = np.concatenate([rng.uniform(1.0, 900.0, 300), rng.uniform(0.05, 3.0, 100),
                          [0.5, 7.0, 898.0, 1e6, math.inf, 0.0, -1.0, math.nan]])
    qs = np.concatenate([rng.uniform(0.0, 1.0, 100), [0.5, 0.95, 0.975, 0.99, 1 - 0.05 / 14,
                                                      1 - 0.0025, 0.0, 1.0, 1e-300]])
    for df in dfs.tolist():
        got = [stats.t_ppf(q, df) for q in qs.tolist()]
        want = sps.t.ppf(qs, df).tolist()
        assert np.array_equal(got, want, equal_nan=True), df
        assert [math.copysign(1, g) for g in got if g == 0] == [
            math.copysign(1, w) for w in want if w == 0]
    # mean_ci's t interval takes its quantile from t_ppf: the bits of t.ppf's interval
    for n in (2, 3, 8, 30):
        x = rng.normal(size=n)
        est = stats.mean_ci(x, confidence=0.9)
        half = float(sps.t.ppf(0.95, n - 1)) * float(np.std(x, ddof=1)) / math.sqrt(n)
        assert (est.low, est.high) == (est.mean - half, est.mean + half)


# --- draft 4 (issue 23 items 4, 9) -------------------------------------------------------

def _ordered_sum_reference(x, width=128):
    """The fixed order ``stats._ordered_sum`` promises, as a plain loop: blocks of ``width``
    added elementwise one after the other, then fsum of the partial sums."""
    x = np.asarray(x, dtype=np.float64).ravel()
    x = np.concatenate([x, np.zeros((-x.size) % width)])
    acc = x[:width].copy()
    for start in range(width, x.size, width):
        acc += x[start:start + width]
    return math.fsum(acc.tolist())


def test_ordered_sum_has_the_bits_of_its_fixed_order():
    rng = np.random.default_rng(11)
    sums = set()
    for size in (1, 5, 127, 128, 129, 899, 2 * 899, 8 * 899, 10_000):
        # magnitudes spread over 16 decades: every other order of the additions rounds
        # differently somewhere, so only the promised order matches the reference
        x = rng.standard_normal(size) * 10.0 ** rng.integers(-8, 8, size)
        for width in (128, 7):
            got = stats._ordered_sum(x, width)
            assert got == _ordered_sum_reference(x, width), (size, width)
            sums.add(got == math.fsum(x.tolist()))
    assert False in sums  # the cases do tell orders apart
    assert stats._ordered_sum(np.array([1e16, 1.0, -1e16]), 2) == 1.0  # (1e16 - 1e16) + 1


def test_shared_test_variance_is_the_item_part_of_a_seeds_by_items_decomposition():
    rng = np.random.default_rng(7)
    z = 100.0 * (rng.random((8, 300)) < 0.1) - 100.0 * (rng.random((8, 300)) < 0.08)
    z[:, :40] += 100.0  # shared hard items: a real item component
    var, df = stats.shared_test_variance(z)
    n, big_n = z.shape
    item, seed, grand = z.mean(axis=0), z.mean(axis=1), z.mean()
    ms_items = n * np.sum((item - grand) ** 2) / (big_n - 1)
    res = z - seed[:, None] - item[None, :] + grand
    ms_res = np.sum(res ** 2) / ((n - 1) * (big_n - 1))
    assert var == pytest.approx((ms_items - ms_res) / (n * big_n), rel=1e-12)
    assert df == pytest.approx((ms_items - ms_res) ** 2 / (
        ms_items ** 2 / (big_n - 1) + ms_res ** 2 / ((n - 1) * (big_n - 1))), rel=1e-12)
    # seeds' spread + this = the crossed-design variance of the grand mean
    total = np.var(z.mean(axis=1), ddof=1) / n + var
    ms_seeds = big_n * np.var(seed, ddof=1)
    assert total == pytest.approx((ms_seeds + ms_items - ms_res) / (n * big_n), rel=1e-12)
    # draft 3's formula counted MS_res / (n N) once more
    old = stats.combination_variance(z.mean(axis=0)[None, :], [1.0])
    assert old == pytest.approx(var + ms_res / (n * big_n), rel=1e-12)
    # no item component (pure within-seed noise): truncated at 0; one seed: var_items / N
    noise = rng.standard_normal((8, 300))
    assert stats.shared_test_variance(noise - noise.mean(axis=0))[0] == 0.0
    one, one_df = stats.shared_test_variance(z[:1])
    assert one == pytest.approx(np.var(z[0], ddof=1) / big_n) and one_df == big_n - 1
    # the same bits for a permutation of the seeds (a fixed order, exactly rounded sums)
    assert stats.shared_test_variance(z[::-1])[0] == pytest.approx(var, rel=1e-14)
    with pytest.raises(ValueError, match="shape"):
        stats.shared_test_variance(z[0])
    with pytest.raises(ValueError, match="non-finite"):
        stats.shared_test_variance(np.full((2, 3), np.nan))


def test_paired_binary_exact_is_mcnemars_conditional_binomial():
    t = stats.paired_binary_exact([1] * 8, [0] * 8)
    assert (t.only_a, t.only_b, t.p_a_more, t.p_b_more) == (8, 0, 1 / 256, 1.0)
    assert t.p_two_sided == 2 / 256 == t.p_min
    t = stats.paired_binary_exact([1, 1, 0, 1, 0, 0], [1, 0, 1, 0, 0, 0])
    assert (t.only_a, t.only_b, t.both, t.neither) == (2, 1, 1, 2)
    assert t.p_a_more == pytest.approx(4 / 8) and t.p_b_more == pytest.approx(7 / 8)
    none = stats.paired_binary_exact([0, 0], [0, 0])
    assert none.p_two_sided == 1.0 and none.p_min == 1.0
    with pytest.raises(ValueError, match="1-d of one length"):
        stats.paired_binary_exact([1, 0], [1])


def test_binomial_p_matches_the_clopper_pearson_bound():
    from scipy import stats as sps

    assert stats.binomial_p(8, 8, 0.5, greater=True) == 1 / 256
    assert stats.binomial_p(0, 8, 0.5, greater=False) == 1 / 256
    assert stats.binomial_p(6, 8, 0.5, greater=True) == pytest.approx(37 / 256)
    for count in range(9):
        p = stats.binomial_p(count, 8, 0.5, greater=True)
        assert p == pytest.approx(sps.binom.sf(count - 1, 8, 0.5))
        # p <= a exactly when the one-sided CP lower bound at 1 - a is above the rate
        low, _ = stats.clopper_pearson(count, 8, 0.9)
        assert (p <= 0.05) == (low > 0.5)
    assert stats.clopper_pearson(0, 8)[0] == 0.0 and stats.clopper_pearson(8, 8)[1] == 1.0
    with pytest.raises(ValueError, match="count"):
        stats.binomial_p(9, 8, 0.5, greater=True)


# --- the paired bootstrap and the one-sided McNemar tests (PROTOCOL.md, "Draft 5") -------


def test_paired_bootstrap_is_the_resampled_mean_plus_a_test_draw():
    """The draws are, resample by resample, the mean of n seeds drawn with replacement plus
    se_test times a standard normal, from the named generator: recomputed here with NumPy's
    own mean from the same stream."""
    values = np.array([0.3, -1.2, 2.5, 0.0, 0.7, 1.1, -0.4, 0.9])
    boot = stats.paired_bootstrap(values, se_test=0.25, resamples=500, seed=7, name="C5 part")
    rng = stats.bootstrap_generator(7, "C5 part")
    picks = rng.integers(0, values.size, size=(500, values.size))
    expect = np.sort(values[picks].mean(axis=1) + 0.25 * rng.standard_normal(500))
    assert boot.n == 8 and boot.draws.shape == (500,)
    np.testing.assert_allclose(boot.draws, expect, rtol=0, atol=1e-14)
    # its quantiles are numpy's "linear" ones
    for q in (0.0, 0.0125, 0.05, 0.5, 0.975, 1.0):
        assert boot.quantile(q) == pytest.approx(np.quantile(boot.draws, q), abs=1e-15)
    low, high = boot.interval(0.9)
    assert (low, high) == pytest.approx((boot.lower_bound(0.05), boot.upper_bound(0.05)))
    assert low < values.mean() < high


def test_paired_bootstrap_is_deterministic_per_name_and_seed():
    values = [0.3, -1.2, 2.5, 0.0, 0.7]
    one = stats.paired_bootstrap(values, resamples=1000, seed=20261128, name="a")
    assert np.array_equal(one.draws, stats.paired_bootstrap(values, resamples=1000,
                                                            seed=20261128, name="a").draws)
    other = stats.paired_bootstrap(values, resamples=1000, seed=20261128, name="b")
    assert not np.array_equal(one.draws, other.draws)
    # the stream is fixed by (seed, name) on any machine: the first draw of this pair, as
    # recorded when the bootstrap was registered
    assert stats.bootstrap_generator(20261128, "a").integers(0, 2**31) == 976109135
    # without test error a resample can only take the seeds' own values' means
    assert one.draws.min() >= min(values) and one.draws.max() <= max(values)


def test_paired_bootstrap_keeps_a_bimodal_outcome_apart_from_t():
    """Three of eight seeds collapse far off: the percentile interval is skewed toward the
    collapse, where the t interval is symmetric about the mean."""
    values = [5.0, 5.2, 4.8, 5.1, 4.9, 80.0, 78.0, 81.0]
    boot = stats.paired_bootstrap(values, resamples=20000, seed=1, name="bimodal")
    est = stats.paired_estimate(values)
    t_low, t_high = est.interval(0.95)
    b_low, b_high = boot.interval(0.95)
    assert b_low > t_low  # the seeds cannot resample below the lowest cluster's mean
    assert (b_high - est.mean) != pytest.approx(est.mean - b_low, rel=0.05)
    assert abs((t_high - est.mean) - (est.mean - t_low)) < 1e-9


@pytest.mark.parametrize("call, error, match", [
    (lambda: stats.paired_bootstrap([1.0], seed=1, name="x"), ValueError, "at least 2"),
    (lambda: stats.paired_bootstrap([1.0, 2.0], seed=-1, name="x"), ValueError, "seed"),
    (lambda: stats.paired_bootstrap([1.0, 2.0], seed=1, name=3), TypeError, "name"),
    (lambda: stats.paired_bootstrap([1.0, 2.0], seed=1, name="x", resamples=5), ValueError,
     "resamples"),
    (lambda: stats.paired_bootstrap([1.0, math.nan], seed=1, name="x"), ValueError,
     "non-finite"),
    (lambda: stats.paired_bootstrap([1.0, 2.0], seed=1, name="x", se_test=-1.0), ValueError,
     "se_test"),
])
def test_paired_bootstrap_refuses_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_one_sided_mcnemar_in_each_direction():
    """16 seeds, 16 discordant all one way: p = 2^-16 in that direction, 1 in the other;
    the smallest one-sided p these counts allow is 2^-16."""
    a = [True] * 16
    b = [False] * 16
    test = stats.paired_binary_exact(a, b)
    assert test.p_a_more == 2.0 ** -16 and test.p_b_more == 1.0
    assert test.p_min_one_sided == 2.0 ** -16
    mixed = stats.paired_binary_exact([True, True, False, False, True],
                                      [False, False, True, False, True])
    # 2 vs 1 discordant: P(Bin(3, 1/2) >= 2) = 1/2; P(Bin(3, 1/2) >= 1) = 7/8
    assert (mixed.p_a_more, mixed.p_b_more, mixed.p_min_one_sided) == (0.5, 0.875, 0.125)
    assert mixed.p_a_more == sps.binomtest(2, 3, 0.5, alternative="greater").pvalue
