"""Divergence analyses against hand-computed answers and brute force."""

from __future__ import annotations

import doctest
import itertools
import math

import numpy as np
import pytest
import torch

from headlab.analysis import divergence as dv
from headlab.analysis.weight_similarity import random_cosine_std
from headlab.errors import ConfigError, DataError

STEPS = [0, 20, 40, 60, 80, 100, 120]


def test_docstring_examples():
    result = doctest.testmod(dv)
    assert result.attempted >= 6 and result.failed == 0


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
    got = dv.role_bifurcation_steps(STEPS, roles)
    assert got.shape == (5,)
    assert got[:2].tolist() == [60.0, 0.0]
    assert math.isnan(got[2]) and math.isnan(got[4])  # never settled within the window
    assert got[3] == 80.0
    # min_points = 1 accepts a single final point as settled: the flip at the end is then 120
    assert dv.role_bifurcation_steps(STEPS, roles[:, 2], min_points=1).tolist() == [120.0]
    # min_points = 3 needs three points: head 0 still 60, a two-point tail is not enough
    assert dv.role_bifurcation_steps([0, 1, 2, 3], [[0, 0], [0, 1], [1, 1], [1, 1]], min_points=3).tolist()[1] == 1.0
    assert math.isnan(dv.role_bifurcation_steps([0, 1, 2, 3], [0, 0, 1, 1], min_points=3)[0])


def test_role_bifurcation_accepts_names_and_single_point():
    names = [["mixed", "local"], ["local", "local"], ["local", "local"]]
    assert dv.role_bifurcation_steps([0, 5, 9], names).tolist() == [5.0, 0.0]
    assert math.isnan(dv.role_bifurcation_steps([7], [3])[0])  # one point: no evidence of settling
    assert dv.role_bifurcation_steps([7], [3], min_points=1).tolist() == [7.0]


def test_bifurcation_rejects_bad_input():
    with pytest.raises(DataError, match="strictly increasing"):
        dv.role_bifurcation_steps([0, 20, 20], [1, 1, 1])
    with pytest.raises(DataError, match=r"\[t, head\]"):
        dv.role_bifurcation_steps([0, 20], [1, 1, 1])
    with pytest.raises(ConfigError, match="min_points"):
        dv.role_bifurcation_steps([0, 20], [1, 1], min_points=0)
    with pytest.raises(DataError, match=r"\[t, head, metric\]"):
        dv.metric_bifurcation_steps([0, 20], np.zeros((2, 3)))
    with pytest.raises(ConfigError, match="tol"):
        dv.metric_bifurcation_steps([0, 20], np.zeros((2, 1, 1)), tol=-0.1)


# ---------------------------------------------------------------- metric bifurcation
def test_metric_bifurcation_scales_each_metric_by_its_range():
    steps = [0, 10, 20, 30, 40, 50]
    # two metrics on different scales: each is measured in units of its own range
    a = [0.0, 10.0, 5.0, 9.6, 10.2, 10.0]  # range 10.2; |dev| / 10.2: 0.98, 0, 0.49, 0.039, 0.0196, 0
    b = [0.0, 50.0, 100.0, 100.0, 102.0, 100.0]  # range 102; |dev| / 102: 0.98, 0.49, 0, 0, 0.0196, 0
    values = np.stack([a, b], axis=-1)[:, None, :]  # [t, head=1, metric=2]
    # a alone settles at step 30 (the dip at 20 is 49% of the range away); b alone at 20
    assert dv.metric_bifurcation_steps(steps, values[..., :1], tol=0.05).tolist() == [30.0]
    assert dv.metric_bifurcation_steps(steps, values[..., 1:], tol=0.05).tolist() == [20.0]
    # both: every metric must be within tolerance -> the later one
    assert dv.metric_bifurcation_steps(steps, values, tol=0.05).tolist() == [30.0]
    # a tighter tolerance moves it: 0.039 > 0.03, so a settles only at 40
    assert dv.metric_bifurcation_steps(steps, values, tol=0.03).tolist() == [40.0]
    # an explicit scale replaces the range: with scale 1, a is 0.2 off at step 40, so only the
    # final point is within tolerance: not settled within the window
    assert math.isnan(dv.metric_bifurcation_steps(steps, values, tol=0.05, scale=[1.0, 102.0])[0])


def test_metric_bifurcation_explicit_scale_and_never_settling():
    steps = [0, 10, 20, 30]
    values = np.array([[[0.0]], [[1.0]], [[0.95]], [[1.0]]])
    # range 1: 0.05 within tol 0.06 -> settled from 10; scale 0.1: 0.5 off -> only the final point -> NaN
    assert dv.metric_bifurcation_steps(steps, values, tol=0.06).tolist() == [10.0]
    assert math.isnan(dv.metric_bifurcation_steps(steps, values, tol=0.06, scale=[0.1])[0])
    # a constant metric (range 0) is ignored; a NaN value is never within tolerance
    flat = np.concatenate([values, np.full_like(values, 3.0)], axis=-1)
    assert dv.metric_bifurcation_steps(steps, flat, tol=0.06).tolist() == [10.0]
    holed = values.copy()
    holed[2, 0, 0] = np.nan
    assert math.isnan(dv.metric_bifurcation_steps(steps, holed, tol=0.06)[0])


# ---------------------------------------------------------------- matching
def _descriptors(n_heads: int, n_metrics: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n_heads, n_metrics)) * np.array([1.0, 10.0, 0.1, 3.0, 1.0])[:n_metrics]


def test_hungarian_recovers_a_known_permutation_of_shuffled_heads():
    a = _descriptors(7, 5, seed=0)
    shuffle = np.random.default_rng(1).permutation(7)  # head j of b is head shuffle[j] of a
    b = a[shuffle] + np.random.default_rng(2).normal(scale=1e-3, size=a.shape)
    roles_a = np.arange(7) % 3
    match = dv.match_heads(a, b, roles_a=roles_a, roles_b=roles_a[shuffle])
    # head i of a sits at position inverse[i] in b
    assert match.permutation.tolist() == np.argsort(shuffle).tolist()
    assert match.same_role == 1.0
    assert match.mean_distance < 0.01
    assert match.random_baseline > 10 * match.mean_distance


def test_matching_is_optimal_and_baseline_is_the_permutation_average():
    a, b = _descriptors(6, 4, seed=3), _descriptors(6, 4, seed=4)
    cost = dv.descriptor_distances(a, b).numpy()
    means = [cost[np.arange(6), list(p)].mean() for p in itertools.permutations(range(6))]  # brute force, 720
    match = dv.match_heads(a, b)
    assert match.mean_distance == pytest.approx(min(means), abs=1e-12)
    assert match.random_baseline == pytest.approx(np.mean(means), abs=1e-12)
    assert match.random_baseline > match.mean_distance
    assert math.isnan(match.same_role) and math.isnan(match.same_role_baseline)


def test_descriptor_distance_and_role_baseline_by_hand():
    a, b = np.array([[0.0, 0.0], [2.0, 4.0]]), np.array([[2.0, 0.0], [0.0, 4.0]])
    # pooled std: metric 0 has values 0, 2, 2, 0 -> 1; metric 1: 0, 4, 0, 4 -> 2
    d = dv.descriptor_distances(a, b)
    assert d[0, 0].item() == pytest.approx(math.sqrt((2.0**2 + 0.0) / 2))
    assert d[1, 1].item() == pytest.approx(math.sqrt((2.0**2 + 0.0) / 2))
    assert d[0, 1].item() == pytest.approx(math.sqrt((0.0 + 2.0**2) / 2))
    m = dv.match_heads([[0.0], [1.0], [5.0]], [[0.0], [1.1], [5.0]], roles_a=[0, 0, 1], roles_b=[0, 1, 1])
    assert m.same_role == pytest.approx(2 / 3)
    assert m.same_role_baseline == pytest.approx(4 / 9)  # a0-b0, a1-b0, a2-b1, a2-b2 of 9 pairs


def test_matching_rejects_nan_and_mismatched_heads():
    with pytest.raises(DataError, match="finite"):
        dv.match_heads([[0.0], [np.nan]], [[0.0], [1.0]])
    with pytest.raises(DataError, match="as many heads"):
        dv.match_heads([[0.0], [1.0]], [[0.0], [1.0], [2.0]])
    with pytest.raises(DataError, match="both runs"):
        dv.match_heads([[0.0], [1.0]], [[0.0], [1.0]], roles_a=[0, 1])


# ---------------------------------------------------------------- init geometry
def test_init_geometry_of_random_gaussian_weights_matches_theory():
    torch.manual_seed(0)
    n_heads, d_model, d_head = 64, 32, 8
    W_Q, W_K = torch.randn(n_heads, d_model, d_head), torch.randn(n_heads, d_model, d_head)
    geo = dv.init_geometry(W_Q, W_K)
    assert geo.q.n_pairs == n_heads * (n_heads - 1) // 2
    assert geo.q.theory_std == random_cosine_std(d_model * d_head) == 1 / 16
    assert geo.q.std == pytest.approx(1 / 16, rel=0.1)
    assert abs(geo.q.mean) < 0.2 * geo.q.theory_std
    assert geo.qk.theory_std == pytest.approx(1 / d_model)
    assert geo.qk.std == pytest.approx(1 / d_model, rel=0.15)
    # independent computation of the pair cosines with numpy
    flat = W_Q.reshape(n_heads, -1).double().numpy()
    unit = flat / np.linalg.norm(flat, axis=1, keepdims=True)
    pairs = (unit @ unit.T)[np.triu_indices(n_heads, 1)]
    assert geo.q.std == pytest.approx(np.sqrt(np.mean(pairs**2)), rel=1e-5)  # float32 weights
    assert geo.q.q50 == pytest.approx(np.median(pairs), abs=1e-6)


def test_init_geometry_detects_heads_sharing_a_direction():
    torch.manual_seed(1)
    shared = torch.randn(1, 32, 8)
    geo = dv.init_geometry(torch.randn(16, 32, 8) + shared)  # every pair has cosine ~0.5
    assert geo.q.std_ratio > 5 and geo.q.mean == pytest.approx(0.5, abs=0.1)
    assert geo.qk is None


def test_cosine_summary_edge_cases():
    s = dv.cosine_summary([], d=64)
    assert s.n_pairs == 0 and math.isnan(s.std) and s.theory_std == 0.125
    s = dv.cosine_summary([0.3, -0.4], d=None)
    assert s.std == pytest.approx(math.sqrt((0.09 + 0.16) / 2)) and math.isnan(s.std_ratio)
    assert dv.offdiagonal(np.arange(9.0).reshape(3, 3)).tolist() == [1.0, 2.0, 5.0]


# ---------------------------------------------------------------- winners move farther
def test_correlation_against_the_rank_formula():
    movement = [3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0]
    importance = [0.3, 0.1, 0.2, 0.25, 0.6, 0.5, 0.05]
    c = dv.movement_importance_correlation(movement, importance)
    d = np.argsort(np.argsort(movement)) - np.argsort(np.argsort(importance))  # ranks; no ties
    n = len(movement)
    assert c.n == n
    assert c.spearman == pytest.approx(1 - 6 * np.sum(d**2) / (n * (n**2 - 1)))
    assert c.pearson == pytest.approx(np.corrcoef(movement, importance)[0, 1])


def test_correlation_drops_nan_and_refuses_constant_input():
    c = dv.movement_importance_correlation([1.0, 2.0, np.nan, 3.0, 4.0], [1.0, 2.0, 3.0, np.nan, 5.0])
    assert c.n == 3 and c.spearman == pytest.approx(1.0)
    assert math.isnan(dv.movement_importance_correlation([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]).spearman)
    assert math.isnan(dv.movement_importance_correlation([1.0, 2.0], [1.0, 2.0]).pearson)
    with pytest.raises(DataError, match="one per head"):
        dv.movement_importance_correlation([1.0, 2.0], [1.0, 2.0, 3.0])
