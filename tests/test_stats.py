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


def test_t_interval_of_one_to_five_is_the_textbook_one():
    est = stats.mean_ci([1, 2, 3, 4, 5])
    half = T_975_DF4 * math.sqrt(2.5) / math.sqrt(5)  # t * s / sqrt(n), s^2 = 2.5
    assert (est.n, est.mean, est.std) == (5, 3.0, pytest.approx(math.sqrt(2.5)))
    assert est.low == pytest.approx(3 - half, rel=1e-12)
    assert est.high == pytest.approx(3 + half, rel=1e-12)
    assert est.half_width == pytest.approx(half, rel=1e-12)
    assert (est.low, est.high) == pytest.approx(
        sps.t.interval(0.95, 4, loc=3, scale=math.sqrt(2.5 / 5)), rel=1e-14)
    # a 99% interval is wider, a 50% one narrower, all centred on the mean
    wide, narrow = stats.mean_ci([1, 2, 3, 4, 5], confidence=0.99), stats.mean_ci(
        [1, 2, 3, 4, 5], confidence=0.5)
    assert narrow.half_width < est.half_width < wide.half_width


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
    assert est.half_width == pytest.approx(t.half_width, rel=0.1)
    assert t.half_width == pytest.approx(1.966 * x.std(ddof=1) / 20, rel=1e-3)


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
