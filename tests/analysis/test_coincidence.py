"""Onset / loss-drop coincidence against a shuffled baseline: exact small cases, the grid's chance level."""

from __future__ import annotations

import numpy as np
import pytest

from headlab.analysis.coincidence import grid_coincidence, seed_coincidence
from headlab.errors import DataError


def test_three_seeds_each_on_its_own_drop_is_one_of_six_permutations():
    result = seed_coincidence([100, 200, 300], [100, 200, 300])
    # permutations of the drops: identity gap 0; swapping neighbours 200/3 (twice); swapping the
    # ends 400/3; the two 3-cycles 400/3 each
    assert result.gap == 0 and result.p_value == pytest.approx(1 / 6)
    assert result.null_gap == pytest.approx((2 * 200 / 3 + 3 * 400 / 3) / 6)


def test_ten_seeds_tracking_their_drops_beat_the_shuffle_and_unrelated_ones_do_not():
    rng = np.random.default_rng(0)
    drops = rng.uniform(800, 2000, 10).round(-2)
    tracking = seed_coincidence(drops - 100, drops, seed=1)
    assert tracking.p_value < 0.01 and tracking.gap == pytest.approx(100)
    unrelated = seed_coincidence(rng.permutation(drops) - 100 + rng.normal(0, 300, 10), drops, seed=1)
    assert unrelated.p_value > 0.05
    assert seed_coincidence(drops - 100, drops, seed=1) == tracking  # seeded: the same p twice


def test_one_onset_on_the_drop_of_a_31_step_grid_has_chance_one_in_31():
    grid = np.arange(0, 3001, 100)
    result = grid_coincidence([1300], 1300, grid, n_draws=40_000, seed=0)
    assert result.gap == 0 and result.p_value == pytest.approx(1 / 31, abs=0.004)
    assert result.null_gap == pytest.approx(np.abs(grid - 1300).mean(), rel=0.02)
    # four heads within 100 of the drop: far rarer under the shuffle than one
    assert grid_coincidence([1200, 1200, 1300, 1300], 1300, grid, seed=0).p_value < 0.001


def test_too_few_pairs_or_no_onsets_are_one_error():
    with pytest.raises(DataError, match="at least 2 seeds"):
        seed_coincidence([100, None], [100, 200])
    with pytest.raises(DataError, match="onsets: expected at least one finite step"):
        grid_coincidence([], 100, [0, 100])
