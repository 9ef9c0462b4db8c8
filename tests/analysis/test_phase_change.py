"""Change-point onsets: exact on a step, the midpoint of a sigmoid, None when flat."""

from __future__ import annotations

import numpy as np
import pytest

from headlab.analysis.phase_change import change_point, onset_step, rise_start
from headlab.errors import DataError


def test_step_function_splits_at_the_jump():
    assert change_point([0, 0, 0, 1, 1]) == (3, 1.0)
    assert onset_step([0, 10, 20, 30, 40], [0, 0, 0, 1, 1], min_change=0.5) == 30


def test_split_minimises_squared_error_by_brute_force():
    rng = np.random.default_rng(0)
    y = np.concatenate([rng.normal(0, 0.1, 7), rng.normal(0.6, 0.1, 5)])
    k, _ = change_point(y)
    sse = [((y[:j] - y[:j].mean()) ** 2).sum() + ((y[j:] - y[j:].mean()) ** 2).sum() for j in range(1, len(y))]
    assert k == int(np.argmin(sse)) + 1 == 7


def test_sigmoid_onset_is_its_midpoint_and_flat_has_none():
    steps = np.arange(0, 2000, 20)
    rise = 0.9 / (1 + np.exp(-(steps - 1000) / 40))
    assert abs(onset_step(steps, rise, min_change=0.3) - 1000) <= 20
    assert onset_step(steps, np.full(len(steps), 0.05) + 0.01 * np.sin(steps), min_change=0.3) is None
    assert onset_step(steps, 3 - rise, min_change=0.3, direction="down") == onset_step(steps, rise, min_change=0.3)
    assert onset_step(steps, rise, min_change=0.3, direction="down") is None


def test_bad_trajectories_are_one_error():
    with pytest.raises(DataError, match="at least 2"):
        change_point([1.0])
    with pytest.raises(DataError, match="2 steps for 3"):
        onset_step([0, 1], [0, 1, 2], min_change=0.1)


# L1H2's induction score every 100 steps, 0..3,000, of `headlab-train experiment=induction` (seed 42,
# 2026-12-02): the midpoint dated it none / 1,400 / 1,500 when the run stopped at 2,000 / 2,500 / 3,000.
L1H2 = [0.027, 0.027, 0.027, 0.025, 0.029, 0.027, 0.024, 0.026, 0.024, 0.026, 0.029, 0.031, 0.04, 0.092, 0.215,
        0.264, 0.297, 0.327, 0.334, 0.376, 0.377, 0.392, 0.417, 0.441, 0.426, 0.456, 0.46, 0.455, 0.473, 0.474, 0.46]


def test_rise_start_does_not_move_with_the_run_length():
    steps = list(range(0, 3001, 100))
    starts = {end: rise_start(steps[:end // 100 + 1], L1H2[:end // 100 + 1], min_rise=0.3) for end in (2000, 2500, 3000)}
    assert starts == {2000: 1200, 2500: 1200, 3000: 1200}  # 0.040 at 1,200 over a 0.024-0.031 baseline
    assert [onset_step(steps[:end // 100 + 1], L1H2[:end // 100 + 1], 0.3) for end in (2000, 2500, 3000)] == [None, 1400, 1500]


@pytest.mark.parametrize("start", [600, 1000, 1420])
def test_planted_sigmoid_and_step_starts_are_recovered_within_one_interval(start):
    rng = np.random.default_rng(start)
    steps = np.arange(0, 3001, 50)
    # a ramp that begins at `start` (the logistic's 1 % point) over noise of sd 0.003 and a slow creep
    sigmoid = 0.03 + 0.0000025 * steps + 0.6 / (1 + np.exp(-(steps - start - 4.6 * 60) / 60))
    noisy = sigmoid + rng.normal(0, 0.003, steps.size)
    found = rise_start(steps, noisy, min_rise=0.3)
    assert found is not None and abs(found - start) <= 50 + 50  # the first grid step past `start`, +- one interval
    step = np.where(steps >= start, 0.8, 0.05) + rng.normal(0, 0.003, steps.size)
    assert rise_start(steps, step, min_rise=0.3) == steps[steps >= start][0]
    assert rise_start(steps, 4.0 - 3 * step, min_rise=1.0, direction="down") == steps[steps >= start][0]


def test_no_rise_start_without_a_rise_or_for_one_noisy_point():
    steps = np.arange(0, 2000, 100)
    flat = 0.05 + np.random.default_rng(1).normal(0, 0.005, steps.size)
    assert rise_start(steps, flat, min_rise=0.3) is None
    blip = flat.copy()
    blip[8] = 0.9  # one outlier, not followed by risen measurements
    assert rise_start(steps, blip, min_rise=0.3) is None
    small = np.where(steps >= 1000, 0.2, 0.05)  # a clear rise, but below min_rise: not formed
    assert rise_start(steps, small, min_rise=0.3) is None


def test_bad_rise_arguments_are_one_error():
    with pytest.raises(DataError, match="window=2"):
        rise_start([0, 1, 2, 3, 4], [0, 0, 0, 1, 1], min_rise=0.5, window=2)
    with pytest.raises(DataError, match="direction must be up or down, got 'sideways'"):
        rise_start([0, 1], [0, 1], min_rise=0.5, direction="sideways")


def test_noise_before_a_late_rise_is_never_dated_as_its_start():
    steps = np.arange(0, 3001, 50)
    found = set()
    for seed in range(50):
        y = 0.05 + np.random.default_rng(seed).normal(0, 0.003, steps.size) + np.where(steps >= 2500, 0.5, 0.0)
        found.add(rise_start(steps, y, min_rise=0.3))
    assert found <= {2450, 2500}  # 2,450: the noise just before the rise already above the bar (one interval)


def test_a_bump_that_falls_back_before_the_head_forms_is_not_its_start():
    # L1H0 of experiment=induction seed=103 (2026-12-02), every 100 steps: up at 400-600, back by 700,
    # the rise proper from 1,100
    l1h0 = [0.027, 0.023, 0.03, 0.025, 0.041, 0.042, 0.037, 0.031, 0.03, 0.035, 0.04, 0.081, 0.29, 0.375, 0.395, 0.405]
    assert rise_start(range(0, 1501, 100), l1h0, min_rise=0.3) == 1100
