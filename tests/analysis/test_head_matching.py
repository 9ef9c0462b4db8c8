"""Cross-seed head matching against brute force and hand-computed distances."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from headlab.analysis import head_matching as hm
from headlab.errors import DataError


def _descriptors(n_heads: int, n_metrics: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n_heads, n_metrics)) * np.array([1.0, 10.0, 0.1, 3.0, 1.0])[:n_metrics]


def test_hungarian_recovers_a_known_permutation_of_shuffled_heads():
    a = _descriptors(7, 5, seed=0)
    shuffle = np.random.default_rng(1).permutation(7)  # head j of b is head shuffle[j] of a
    b = a[shuffle] + np.random.default_rng(2).normal(scale=1e-3, size=a.shape)
    roles_a = np.arange(7) % 3
    match = hm.match_heads(a, b, roles_a=roles_a, roles_b=roles_a[shuffle])
    # head i of a sits at position inverse[i] in b
    assert match.permutation.tolist() == np.argsort(shuffle).tolist()
    assert match.same_role == 1.0
    assert match.mean_distance < 0.01
    assert match.random_baseline > 10 * match.mean_distance


def test_matching_is_optimal_and_baseline_is_the_permutation_average():
    a, b = _descriptors(6, 4, seed=3), _descriptors(6, 4, seed=4)
    cost = hm.descriptor_distances(a, b).numpy()
    means = [cost[np.arange(6), list(p)].mean() for p in itertools.permutations(range(6))]  # brute force, 720
    match = hm.match_heads(a, b)
    assert match.mean_distance == pytest.approx(min(means), abs=1e-12)
    assert match.random_baseline == pytest.approx(np.mean(means), abs=1e-12)
    assert match.random_baseline > match.mean_distance
    assert math.isnan(match.same_role) and math.isnan(match.same_role_baseline)


def test_descriptor_distance_and_role_baseline_by_hand():
    a, b = np.array([[0.0, 0.0], [2.0, 4.0]]), np.array([[2.0, 0.0], [0.0, 4.0]])
    # pooled std: metric 0 has values 0, 2, 2, 0 -> 1; metric 1: 0, 4, 0, 4 -> 2
    d = hm.descriptor_distances(a, b)
    assert d[0, 0].item() == pytest.approx(math.sqrt((2.0**2 + 0.0) / 2))
    assert d[1, 1].item() == pytest.approx(math.sqrt((2.0**2 + 0.0) / 2))
    assert d[0, 1].item() == pytest.approx(math.sqrt((0.0 + 2.0**2) / 2))
    m = hm.match_heads([[0.0], [1.0], [5.0]], [[0.0], [1.1], [5.0]], roles_a=[0, 0, 1], roles_b=[0, 1, 1])
    assert m.same_role == pytest.approx(2 / 3)
    assert m.same_role_baseline == pytest.approx(4 / 9)  # a0-b0, a1-b0, a2-b1, a2-b2 of 9 pairs


def test_matching_rejects_nan_and_mismatched_heads():
    with pytest.raises(DataError, match="finite"):
        hm.match_heads([[0.0], [np.nan]], [[0.0], [1.0]])
    with pytest.raises(DataError, match="as many heads"):
        hm.match_heads([[0.0], [1.0]], [[0.0], [1.0], [2.0]])
    with pytest.raises(DataError, match="both runs"):
        hm.match_heads([[0.0], [1.0]], [[0.0], [1.0]], roles_a=[0, 1])
