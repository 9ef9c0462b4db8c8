"""Change-point onsets: exact on a step, the midpoint of a sigmoid, None when flat."""

from __future__ import annotations

import numpy as np
import pytest

from headlab.analysis.phase_change import change_point, onset_step
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
