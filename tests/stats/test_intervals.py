"""Intervals that never claim certainty they do not have, checked against closed forms and scipy."""

import math

import numpy as np
import pytest
from scipy import stats

from headlab.stats import cluster_proportion_ci, mean_ci, paired_ci, prediction_interval, proportion_ci
from headlab.stats.decisions import holm, minimum_detectable, one_sided_p, seeds_to_decide


@pytest.mark.parametrize("trials", [24, 48])
def test_zero_successes_give_the_exact_upper_bound_not_zero(trials):
    # 0 of n: the Clopper-Pearson upper bound solves (1 - p)^n = 0.025
    ci = proportion_ci(0, trials)
    assert ci.low == 0.0 and ci.high == pytest.approx(1 - 0.025 ** (1 / trials), rel=1e-9)
    assert ci.high > 0.07


def test_all_zero_seeds_pool_to_the_exact_bound():
    ci = cluster_proportion_ci([0, 0, 0], [8, 8, 8])
    assert ci.high == pytest.approx(1 - 0.025 ** (1 / 24), rel=1e-9)  # 0.142: above C12's 0.05
    assert ci.high > ci.low


def test_cluster_interval_is_at_least_as_wide_as_the_exact_one():
    k, n = [1, 8, 15], [16, 16, 16]
    exact = proportion_ci(sum(k), sum(n))
    ci = cluster_proportion_ci(k, n)
    assert ci.low <= exact.low and ci.high >= exact.high
    assert ci.estimate == pytest.approx(24 / 48)
    assert "bootstrap" in ci.method


def test_paired_interval_is_scipys_ttest_rel():
    a, b = np.array([0.8, 0.82, 0.79, 0.85]), np.array([0.78, 0.80, 0.80, 0.81])
    ref = stats.ttest_rel(a, b).confidence_interval(0.95)
    ci = paired_ci(a - b)
    assert (ci.low, ci.high) == pytest.approx((ref.low, ref.high))


def test_equal_differences_give_no_interval_rather_than_zero_width():
    ci = paired_ci([0.0, 0.0, 0.0])
    assert ci.estimate == 0.0 and math.isnan(ci.low) and math.isnan(ci.high)
    assert "no spread" in ci.method


def test_one_sided_p_matches_scipy_on_the_same_seeds():
    x = np.array([0.01, 0.03, 0.02, 0.04, 0.00])
    se = x.std(ddof=1) / math.sqrt(x.size)
    assert one_sided_p(x.mean(), se, x.size - 1, 0.02, "smaller") == pytest.approx(
        stats.ttest_1samp(x, 0.02, alternative="less").pvalue)
    assert one_sided_p(x.mean(), se, x.size - 1, 0.0, "larger") == pytest.approx(
        stats.ttest_1samp(x, 0.0, alternative="greater").pvalue)


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04: x3, x2, x1 with the running maximum
    assert holm([0.04, 0.01, 0.03]) == pytest.approx([0.06, 0.03, 0.06])


def test_power_against_the_noncentral_t():
    n = 12
    d = minimum_detectable(1.0, n)
    crit = stats.t.ppf(0.975, n - 1)  # one-sided at ALPHA 0.025
    assert stats.nct.sf(crit, n - 1, d * math.sqrt(n)) == pytest.approx(0.8, abs=1e-5)
    assert seeds_to_decide(d, 1.0) == pytest.approx(n, abs=1e-3)


def test_prediction_interval_is_t_with_sqrt_one_plus_one_over_n_and_covers_a_new_seed():
    values = [1000, 1100, 1200, 1300, 1400]
    half = 2.7764451051977987 * np.std(values, ddof=1) * np.sqrt(1 + 1 / 5)  # t(0.975, 4), by hand
    pi = prediction_interval(values)
    assert (pi.low, pi.high) == pytest.approx((1200 - half, 1200 + half))
    assert pi.high - pi.low > mean_ci(values).high - mean_ci(values).low  # wider than the mean's CI
    rng = np.random.default_rng(0)
    covered = 0
    for _ in range(2000):  # a new draw lands inside the interval of 10 earlier ones ~95 % of the time
        sample = rng.normal(1200, 150, 11)
        one = prediction_interval(sample[:10])
        covered += one.low <= sample[10] <= one.high
    assert 0.93 <= covered / 2000 <= 0.97
    assert np.isnan(prediction_interval([5.0]).low)
