"""Bifurcation steps against hand-computed switch points."""

from __future__ import annotations

import math

import numpy as np
import pytest

from headlab.analysis import bifurcation as bf
from headlab.errors import ConfigError, DataError

STEPS = [0, 20, 40, 60, 80, 100, 120]


# ---------------------------------------------------------------- role bifurcation
def test_role_bifurcation_known_switch_points():
    roles = np.array([
        # switch at 60 | constant | flips at the very end | oscillates, settles at 80 | NaN at the end
        [5, 2, 1, 1, 3],
        [5, 2, 1, 0, 3],
        [5, 2, 1, 1, 3],
        [0, 2, 1, 0, 3],
        [0, 2, 1, 1, 3],
        [0, 2, 1, 1, 3],
        [0, 2, 4, 1, np.nan],
    ])
    got = bf.role_bifurcation_steps(STEPS, roles)
    assert got.shape == (5,)
    assert got[:2].tolist() == [60.0, 0.0]
    assert math.isnan(got[2]) and math.isnan(got[4])  # never settled within the window
    assert got[3] == 80.0
    # min_points = 1 accepts a single final point as settled: the flip at the end is then 120
    assert bf.role_bifurcation_steps(STEPS, roles[:, 2], min_points=1).tolist() == [120.0]
    # min_points = 3 needs three points: head 0 still 60, a two-point tail is not enough
    assert bf.role_bifurcation_steps([0, 1, 2, 3], [[0, 0], [0, 1], [1, 1], [1, 1]], min_points=3).tolist()[1] == 1.0
    assert math.isnan(bf.role_bifurcation_steps([0, 1, 2, 3], [0, 0, 1, 1], min_points=3)[0])


def test_role_bifurcation_accepts_names_and_single_point():
    names = [["mixed", "local"], ["local", "local"], ["local", "local"]]
    assert bf.role_bifurcation_steps([0, 5, 9], names).tolist() == [5.0, 0.0]
    assert math.isnan(bf.role_bifurcation_steps([7], [3])[0])  # one point: no evidence of settling
    assert bf.role_bifurcation_steps([7], [3], min_points=1).tolist() == [7.0]


def test_bifurcation_rejects_bad_input():
    with pytest.raises(DataError, match="strictly increasing"):
        bf.role_bifurcation_steps([0, 20, 20], [1, 1, 1])
    with pytest.raises(DataError, match=r"\[t, head\]"):
        bf.role_bifurcation_steps([0, 20], [1, 1, 1])
    with pytest.raises(ConfigError, match="min_points"):
        bf.role_bifurcation_steps([0, 20], [1, 1], min_points=0)
    with pytest.raises(DataError, match=r"\[t, head, metric\]"):
        bf.metric_bifurcation_steps([0, 20], np.zeros((2, 3)))
    with pytest.raises(ConfigError, match="tol"):
        bf.metric_bifurcation_steps([0, 20], np.zeros((2, 1, 1)), tol=-0.1)


# ---------------------------------------------------------------- metric bifurcation
def test_metric_bifurcation_scales_each_metric_by_its_range():
    steps = [0, 10, 20, 30, 40, 50]
    # two metrics on different scales: each is measured in units of its own range
    a = [0.0, 10.0, 5.0, 9.6, 10.2, 10.0]  # range 10.2; |dev| / 10.2: 0.98, 0, 0.49, 0.039, 0.0196, 0
    b = [0.0, 50.0, 100.0, 100.0, 102.0, 100.0]  # range 102; |dev| / 102: 0.98, 0.49, 0, 0, 0.0196, 0
    values = np.stack([a, b], axis=-1)[:, None, :]  # [t, head=1, metric=2]
    # a alone settles at step 30 (the dip at 20 is 49% of the range away); b alone at 20
    assert bf.metric_bifurcation_steps(steps, values[..., :1], tol=0.05).tolist() == [30.0]
    assert bf.metric_bifurcation_steps(steps, values[..., 1:], tol=0.05).tolist() == [20.0]
    # both: every metric must be within tolerance -> the later one
    assert bf.metric_bifurcation_steps(steps, values, tol=0.05).tolist() == [30.0]
    # a tighter tolerance moves it: 0.039 > 0.03, so a settles only at 40
    assert bf.metric_bifurcation_steps(steps, values, tol=0.03).tolist() == [40.0]
    # an explicit scale replaces the range: with scale 1, a is 0.2 off at step 40, so only the
    # final point is within tolerance: not settled within the window
    assert math.isnan(bf.metric_bifurcation_steps(steps, values, tol=0.05, scale=[1.0, 102.0])[0])


def test_metric_bifurcation_explicit_scale_and_never_settling():
    steps = [0, 10, 20, 30]
    values = np.array([[[0.0]], [[1.0]], [[0.95]], [[1.0]]])
    # range 1: 0.05 within tol 0.06 -> settled from 10; scale 0.1: 0.5 off -> only the final point -> NaN
    assert bf.metric_bifurcation_steps(steps, values, tol=0.06).tolist() == [10.0]
    assert math.isnan(bf.metric_bifurcation_steps(steps, values, tol=0.06, scale=[0.1])[0])
    # a constant metric (range 0) is ignored; a NaN value is never within tolerance
    flat = np.concatenate([values, np.full_like(values, 3.0)], axis=-1)
    assert bf.metric_bifurcation_steps(steps, flat, tol=0.06).tolist() == [10.0]
    holed = values.copy()
    holed[2, 0, 0] = np.nan
    assert math.isnan(bf.metric_bifurcation_steps(steps, holed, tol=0.06)[0])
