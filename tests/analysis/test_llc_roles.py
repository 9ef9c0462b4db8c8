"""rLLC curves against roles: hand-computed ARIs and nulls, sklearn as the independent reference, stage dates."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.cluster import AgglomerativeClustering
from sklearn.metrics import adjusted_rand_score

from headlab.analysis.llc_roles import (
    adjusted_rand_index,
    ari_null,
    cluster_curves,
    combined_ari_p,
    half_rise_step,
    normalised_curves,
    role_separation,
    steepest_rise_step,
)
from headlab.errors import DataError

STEPS = np.array([100, 200, 400, 600, 800, 1000, 1200, 1400, 1600, 2000, 3000], dtype=float)


def _sigmoid(mid: float, height: float) -> np.ndarray:
    return height / (1 + np.exp(-(STEPS - mid) / 80))


def test_ari_hand_computed_and_equal_to_sklearn():
    # [[2, 0, 0], [0, 1, 1]]: 1 agreeing pair, row pairs 2, column pairs 1, of 6: (1 - 1/3) / (3/2 - 1/3) = 4/7
    assert adjusted_rand_index([0, 0, 1, 1], [0, 0, 1, 2]) == pytest.approx(4 / 7)
    assert adjusted_rand_index(["a", "a", "b", "b"], [5, 5, 7, 7]) == 1.0  # labels' names do not matter
    assert adjusted_rand_index([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(-0.5)
    assert adjusted_rand_index([0, 0, 0], [1, 1, 1]) == 1.0 == adjusted_rand_score([0, 0, 0], [1, 1, 1])
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(2, 12))
        a, b = rng.integers(0, 4, n), rng.integers(0, 3, n)
        assert adjusted_rand_index(a, b) == pytest.approx(adjusted_rand_score(a, b), abs=1e-12)


def test_exact_null_of_two_pairs_is_one_third_each_partition():
    # 24 orders of [0, 0, 1, 1] give the 3 pairings 8 times each: ARI 1, -1/2, -1/2 -> mean 0, p = 1/3
    null = ari_null([0, 0, 1, 1], ["p", "p", "i", "i"])
    assert null.size == 24 and null.mean() == pytest.approx(0.0)
    assert sorted(set(np.round(null, 9))) == [-0.5, 1.0]
    result = role_separation(np.array([[0, 1.0], [0, 1.0], [1.0, 0], [1.0, 0]]), ["p", "p", "i", "i"], [0, 0, 1, 1])
    assert result.ari == 1.0 and result.p_value == pytest.approx(1 / 3) and result.layer_ari == 1.0


def test_null_equals_sklearn_on_every_permutation():
    import itertools

    labels, roles = [0, 0, 1, 1, 2], ["p", "i", "i", "i", "o"]
    expected = [adjusted_rand_score(labels, [roles[i] for i in order]) for order in itertools.permutations(range(5))]
    np.testing.assert_allclose(ari_null(labels, roles), expected, atol=1e-12)
    drawn = ari_null(labels * 2, roles * 2, n_draws=50, seed=3)  # 10! > 50: seeded draws, the same twice
    np.testing.assert_array_equal(drawn, ari_null(labels * 2, roles * 2, n_draws=50, seed=3))
    rng = np.random.default_rng(3)  # the same draws, scored one by one by sklearn
    orders = [rng.permutation(10) for _ in range(50)]
    np.testing.assert_allclose(drawn, [adjusted_rand_score(labels * 2, [(roles * 2)[i] for i in o]) for o in orders],
                               atol=1e-12)


def test_two_separated_groups_score_one_and_shuffled_roles_score_about_zero():
    rng = np.random.default_rng(1)
    early = [_sigmoid(500, h) + rng.normal(0, 0.01, STEPS.size) for h in (0.3, 0.8, 1.5, 0.5)]
    late = [_sigmoid(1300, h) + rng.normal(0, 0.01, STEPS.size) for h in (0.4, 1.7, 0.9, 1.2)]
    curves = np.array(early + late)
    roles = ["previous_token"] * 4 + ["induction"] * 4
    result = role_separation(curves, roles, [0] * 4 + [1] * 4, seed=0)
    assert result.ari == 1.0 and result.k == 2 and result.n_heads == 8
    # 8! > 10,000: a seeded random null; an ARI of 1 needs the 2 of 70 splits that match, so p ~ 1/35
    assert result.p_value == pytest.approx(2 / 70, abs=0.006)
    assert abs(result.null_mean) < 0.03 and result.null_q95 < 1.0
    shuffled = [adjusted_rand_index(result.labels, rng.permutation(roles)) for _ in range(4000)]
    assert abs(np.mean(shuffled)) < 0.03
    # clustered by size instead of shape, the heights (not the timing) decide: normalising is what separates
    assert adjusted_rand_index(cluster_curves(curves, 2, normalise=False), roles) < 1.0


def test_ward_clusters_equal_sklearns_agglomerative_clustering():
    rng = np.random.default_rng(2)
    for _ in range(30):
        curves = rng.normal(size=(8, 11)).cumsum(axis=1)
        for k in (2, 3):
            ours = cluster_curves(curves, k)
            theirs = AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(normalised_curves(curves))
            assert adjusted_rand_score(ours, theirs) == 1.0


def test_normalised_curves_keep_shape_and_leave_a_zero_curve_zero():
    out = normalised_curves(np.array([[1.0, 2.0, 4.0], [0.0, 0.0, 0.0], [-2.0, 1.0, 0.0]]))
    np.testing.assert_allclose(out, [[0.25, 0.5, 1.0], [0, 0, 0], [-1.0, 0.5, 0.0]])


def test_combined_p_over_seeds():
    # one seed at ARI 1 whose null is always 0: no draw reaches the sum, p = 1 / (n + 1)
    assert combined_ari_p([1.0], [np.zeros(24)], n_draws=999) == pytest.approx(1 / 1000)
    # observed equal to a constant null: every draw reaches it
    assert combined_ari_p([0.0, 0.0], [np.zeros(3), np.zeros(5)], n_draws=99) == 1.0
    # two seeds, each null {1 w.p. 1/3, -1/2 w.p. 2/3}: the sum reaches 2 only when both draw 1, p ~ 1/9
    null = ari_null([0, 0, 1, 1], [0, 0, 1, 1])
    assert combined_ari_p([1.0, 1.0], [null, null], n_draws=40_000) == pytest.approx(1 / 9, abs=0.006)


def test_stage_dates_hand_computed():
    steps, curve = [0, 100, 200, 400], [0.0, 0.1, 0.5, 0.7]
    assert steepest_rise_step(steps, curve) == 150.0  # slopes 0.001, 0.004, 0.001 per step
    assert half_rise_step(steps, curve) == pytest.approx(162.5)  # bar 0.35: 100 + 0.25 / 0.4 x 100
    assert math.isnan(steepest_rise_step(steps, [1.0, 0.9, 0.5, 0.2]))
    assert math.isnan(half_rise_step(steps, [1.0, 0.9, 0.5, 0.2]))
    # a planted late sigmoid is dated inside the sampled interval around its midpoint
    assert 1200 <= steepest_rise_step(STEPS, _sigmoid(1300, 1.0)) <= 1400
    assert half_rise_step(STEPS, _sigmoid(1300, 1.0)) == pytest.approx(1300, abs=25)


def test_bad_input_is_one_error():
    with pytest.raises(DataError, match="NaN"):
        cluster_curves(np.array([[0.0, np.nan], [1.0, 2.0]]), 2)
    with pytest.raises(DataError, match="k must be"):
        cluster_curves(np.ones((3, 4)), 4)
    with pytest.raises(DataError, match="different length"):
        adjusted_rand_index([0, 1], [0, 1, 1])
    with pytest.raises(DataError, match="increasing steps"):
        steepest_rise_step([0, 0, 1], [0.0, 1.0, 2.0])
    with pytest.raises(DataError, match="roles"):
        role_separation(np.ones((3, 4)), ["a", "b"])
