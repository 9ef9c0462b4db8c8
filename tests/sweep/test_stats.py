"""Seed statistics against scipy's own t-interval and hand-made validation curves."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy import stats as scipy_stats

from headlab.errors import ConfigError
from headlab.stats import mean_ci
from headlab.sweep.stats import steps_to_converge


@pytest.mark.parametrize("values", [[0.81, 0.79, 0.84], [1.0, 2.0, 4.0, 8.0, 16.0], [0.5, 0.5001]])
def test_mean_ci_matches_scipy_t_interval(values):
    ci = mean_ci(values)
    low, high = scipy_stats.t.interval(0.95, len(values) - 1, loc=pd.Series(values).mean(), scale=scipy_stats.sem(values))
    assert ci.n == len(values)
    assert (ci.low, ci.high) == pytest.approx((low, high), rel=1e-12)


def test_mean_ci_is_clipped_to_the_range_of_the_statistic():
    wide = mean_ci([0.70, 0.98, 0.99])  # 3 seeds, one bad: the t-interval passes 1
    clipped = mean_ci([0.70, 0.98, 0.99], bounds=(0.0, 1.0))
    assert wide.high > 1.0 and clipped.high == 1.0
    assert (clipped.mean, clipped.low) == (wide.mean, wide.low)  # only the side past the bound moves
    inside = mean_ci([0.81, 0.79, 0.84], bounds=(0.0, 1.0))
    assert (inside.low, inside.high) == (mean_ci([0.81, 0.79, 0.84]).low, mean_ci([0.81, 0.79, 0.84]).high)


def test_mean_ci_drops_missing_seeds_and_needs_two_for_an_interval():
    assert mean_ci([0.8, None, float("nan"), 0.9]).n == 2
    one = mean_ci([0.7])
    assert one.mean == 0.7 and math.isnan(one.low) and math.isnan(one.high)
    assert math.isnan(mean_ci([]).mean)
    with pytest.raises(ConfigError):
        mean_ci([1.0, 2.0], confidence=95)
    wide, narrow = mean_ci([1.0, 2.0, 3.0], 0.99), mean_ci([1.0, 2.0, 3.0], 0.5)
    assert wide.high - wide.low > narrow.high - narrow.low


def test_steps_to_converge_uses_the_best_value():
    curve = pd.DataFrame({"step": [300, 100, 200, 400], "val_acc": [0.9, 0.5, 0.86, 0.88]})  # unsorted on purpose
    assert steps_to_converge(curve) == 200  # 0.86 >= 0.95 * 0.9 = 0.855
    assert steps_to_converge(curve, fraction=0.99) == 300
    assert math.isnan(steps_to_converge(None))
    assert math.isnan(steps_to_converge(pd.DataFrame({"step": [1], "val_acc": [float("nan")]})))
