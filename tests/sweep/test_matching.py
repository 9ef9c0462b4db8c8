"""The one cross-seed head matching (`headlab.sweep.matching.match_layer`) and its two users."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from headlab.errors import DataError
from headlab.store import head_metric_rows
from headlab.sweep.heads import seed_matches
from headlab.sweep.importance import config_importance
from headlab.sweep.matching import DESCRIPTOR_METRICS, ROLE_METRIC, config_finals, final_values, match_layer
from headlab.sweep.runs import Run

X, Y = DESCRIPTOR_METRICS[:2]


def _run(tmp_path, job, per_layer, importance=None):
    """A usable run whose only measurement is `per_layer[layer][metric] -> values [head]`."""
    run_dir = tmp_path / job
    run_dir.mkdir()
    if importance is not None:
        head_metric_rows(job, 10, 0, [{"ablation_dloss": np.asarray(importance)}]).to_parquet(run_dir / "head_importance.parquet")
    return Run(job=job, run_dir=run_dir, status="completed", head_metrics=head_metric_rows(job, 10, 0, per_layer))


def test_final_values_are_the_last_step_only():
    early = head_metric_rows("r", 0, 0, [{X: np.array([9.0, 9.0])}])
    last = head_metric_rows("r", 10, 1, [{X: np.array([1.0, 2.0])}])
    final = final_values(pd.concat([early, last], ignore_index=True))
    assert final[X].to_dict() == {(0, 0): 1.0, (0, 1): 2.0}


def test_a_permutation_of_heads_is_recovered_exactly_in_every_layer(tmp_path):
    rng = np.random.default_rng(3)
    perm = np.array([3, 0, 4, 1, 2])  # head j of run b is head perm[j] of run a
    inverse = [1, 3, 4, 0, 2]  # so head i of run a is head inverse[i] of run b (by hand: perm[inverse[i]] == i)
    layers_a = [{**{m: rng.normal(size=5) for m in DESCRIPTOR_METRICS}, ROLE_METRIC: np.array([0, 1, 2, 3, 4.0])}
                for _ in range(2)]
    layers_b = [{m: values[perm] for m, values in layer.items()} for layer in layers_a]
    finals = config_finals([_run(tmp_path, "a", layers_a), _run(tmp_path, "b", layers_b)])
    for layer in (0, 1):
        match = match_layer(finals, "a", "b", layer)
        assert match.permutation.tolist() == inverse
        assert match.mean_distance == 0.0 and match.same_role == 1.0 and match.same_role_baseline == pytest.approx(1 / 5)


def _yardstick_runs(tmp_path, importance=False):
    """Seeds a, b, c of one 2-head layer where the scaling decides how a and b match.

    Metric X says "swap" (a's heads are b's heads swapped in X), metric Y says "keep" (40 apart
    kept, 60 swapped). Over a and b alone X's std is 0.5, so X weighs heavily and the swap wins;
    seed c spreads X (a head at 20), so over all three seeds X weighs little and Y keeps the order.
    """
    values = {"a": ([0.0, 1.0], [0.0, 100.0]), "b": ([1.0, 0.0], [40.0, 60.0]), "c": ([0.0, 20.0], [50.0, 50.0])}
    imp = {"a": [0.1, 0.9], "b": [0.2, 0.8], "c": [0.3, 0.7]}
    return [_run(tmp_path, job, [{X: np.array(x), Y: np.array(y), ROLE_METRIC: np.array([0.0, 1.0])}],
                 imp[job] if importance else None) for job, (x, y) in values.items()]


# by hand, over all three seeds: X = [0, 1, 1, 0, 0, 20] has variance 67 - (11/3)^2 = 482/9,
# Y = [0, 100, 40, 60, 50, 50] has variance 5200/6 = 2600/3
KEEP = math.sqrt((1 / (482 / 9) + 40**2 / (2600 / 3)) / 2)  # RMS distance of a's head i to b's head i
SWAP = math.sqrt((0.0 + 60**2 / (2600 / 3)) / 2)


def test_the_scale_is_every_seed_of_the_config_not_the_pair(tmp_path):
    a, b, c = _yardstick_runs(tmp_path)
    config = match_layer(config_finals([a, b, c]), "a", "b", 0)
    assert config.permutation.tolist() == [0, 1]
    assert config.mean_distance == pytest.approx(KEEP) and config.random_baseline == pytest.approx((KEEP + SWAP) / 2)
    # the same pair on its own yardstick (std 0.5 and sqrt(1300)) matches the other way round
    pair = match_layer(config_finals([a, b]), "a", "b", 0)
    assert pair.permutation.tolist() == [1, 0]
    assert pair.mean_distance == pytest.approx(60 / math.sqrt(1300) / math.sqrt(2))


def test_seed_matches_and_importance_use_the_same_matching(tmp_path):
    """sweep_matches.csv's pair (a, b) and the importance averaged onto a both keep the head order here."""
    a, b, c = _yardstick_runs(tmp_path, importance=True)
    matches = seed_matches([a, b, c]).set_index(["job_a", "job_b"])
    assert matches.loc[("a", "b"), "matched_distance"] == pytest.approx(KEEP)
    assert matches.loc[("a", "b"), "same_role"] == 1.0 and (matches["error"] == "").all()
    averaged, taus = config_importance([a, b, c])
    assert averaged["ablation_dloss_mean"].tolist() == pytest.approx([0.2, 0.8])  # (0.1+0.2+0.3)/3, (0.9+0.8+0.7)/3
    assert taus.set_index(["job_a", "job_b"]).loc[("a", "b"), "kendall_tau"] == pytest.approx(1.0)  # swapped: -1


def test_a_seed_without_importance_still_counts_for_the_scale(tmp_path):
    """c has no importance file: it is no seed of the average, but it is part of the yardstick."""
    a, b, c = _yardstick_runs(tmp_path, importance=True)
    (c.run_dir / "head_importance.parquet").unlink()
    averaged, _ = config_importance([a, b, c])
    assert averaged["ablation_dloss_mean"].tolist() == pytest.approx([0.15, 0.85]) and (averaged["n_seeds"] == 2).all()


def test_a_metric_missing_on_one_seed_is_left_out_for_every_pair(tmp_path):
    a, b, c = _yardstick_runs(tmp_path)
    c.head_metrics.loc[(c.head_metrics["metric"] == Y) & (c.head_metrics["head"] == 1), "value"] = np.nan
    match = match_layer(config_finals([a, b, c]), "a", "b", 0)
    assert match.permutation.tolist() == [1, 0] and match.mean_distance == 0.0  # X alone: b is a swapped


def test_a_layer_that_cannot_be_matched_says_why(tmp_path):
    one_layer = _run(tmp_path, "a", [{X: np.array([0.0, 1.0]), Y: np.array([0.0, 1.0])}])
    two_layers = _run(tmp_path, "b", [{X: np.array([0.0, 1.0])}, {X: np.array([0.0, 1.0])}])
    three_heads = _run(tmp_path, "c", [{X: np.array([0.0, 1.0, 2.0])}])
    unmeasured = _run(tmp_path, "d", [{X: np.array([0.0, np.nan]), Y: np.array([np.nan, 0.0])}])  # each misses a head
    with pytest.raises(DataError, match=r"layer 1: not measured in both runs a and b"):
        match_layer(config_finals([one_layer, two_layers]), "a", "b", 1)
    with pytest.raises(DataError, match=r"layer 0: run a has 2 heads and run c 3"):
        match_layer(config_finals([one_layer, three_heads]), "a", "c", 0)
    with pytest.raises(DataError, match=r"layer 0: none of the descriptor metrics .* every head of every seed"):
        match_layer(config_finals([one_layer, unmeasured]), "a", "d", 0)
    rows = seed_matches([one_layer, two_layers])
    assert rows["error"].tolist() == ["", "layer 1: not measured in both runs a and b"]
    assert rows["matched_distance"].iloc[0] == 0.0 and np.isnan(rows["matched_distance"].iloc[1])
