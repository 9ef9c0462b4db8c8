"""Sweep-level importance: matched across seeds, averaged, and its rank stability vs shuffled matchings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from headlab.store import head_metric_rows
from headlab.sweep.importance import config_importance, final_importance, seed_averaged_importance, write_sweep_importance
from headlab.sweep.matching import DESCRIPTOR_METRICS
from headlab.sweep.runs import Run


def _run(tmp_path, job, descriptors, importance):
    """A usable run with one measurement (descriptors [head, metric]) and head_importance.parquet."""
    run_dir = tmp_path / job
    run_dir.mkdir()
    per_layer = [{m: descriptors[:, i] for i, m in enumerate(DESCRIPTOR_METRICS)}]
    metrics = head_metric_rows(job, 10, 0, per_layer)
    head_metric_rows(job, 10, 0, [{"ablation_dloss": importance}]).to_parquet(run_dir / "head_importance.parquet")
    return Run(job=job, run_dir=run_dir, status="completed", head_metrics=metrics)


def test_permuted_seed_is_matched_back_and_ranks_agree(tmp_path):
    rng = np.random.default_rng(0)
    desc = rng.normal(size=(6, len(DESCRIPTOR_METRICS))) * 3
    importance = np.array([0.5, 0.01, 0.2, 0.0, 0.3, 0.05])
    perm = np.array([3, 0, 5, 1, 4, 2])  # head i of seed b is head perm[i] of seed a
    a = _run(tmp_path, "0", desc, importance)
    b = _run(tmp_path, "1", desc[perm], importance[perm] * 2)
    averaged, taus = config_importance([a, b])
    assert taus.kendall_tau.item() == pytest.approx(1.0)
    assert abs(taus.tau_shuffled_mean.item()) < 0.2
    assert averaged["ablation_dloss_mean"].to_numpy() == pytest.approx(importance * 1.5)

    written = write_sweep_importance(tmp_path / "agg", {"cfg": [a, b]})
    assert [p.name for p in written] == ["sweep_importance.csv", "sweep_importance_tau.csv"]
    assert set(pd.read_csv(written[1]).config) == {"cfg"}


def test_nothing_without_importance_files(tmp_path):
    desc = np.eye(4, len(DESCRIPTOR_METRICS))
    a = _run(tmp_path, "0", desc, np.ones(4))
    (a.run_dir / "head_importance.parquet").unlink()
    b = _run(tmp_path, "1", desc, np.ones(4))
    assert write_sweep_importance(tmp_path / "agg", {"cfg": [a, b]}) == []


def test_seed_average_is_in_the_chosen_runs_own_head_order(tmp_path):
    """`seed_averaged_importance(runs, job)`: indexed by `job`'s heads, the other seed matched to them
    (the seed_avg pruning ranking of `job`)."""
    rng = np.random.default_rng(1)
    desc = rng.normal(size=(5, len(DESCRIPTOR_METRICS))) * 3
    importance = np.array([0.5, 0.01, 0.2, 0.0, 0.3])
    perm = np.array([2, 4, 0, 1, 3])  # head i of seed b is head perm[i] of seed a
    a = _run(tmp_path, "0", desc, importance)
    b = _run(tmp_path, "1", desc[perm], importance[perm] * 3)
    for_b = seed_averaged_importance([a, b], "1")
    assert list(for_b.columns) == ["layer", "head", "n_seeds", "ablation_dloss_mean", "ablation_dloss_std"]
    assert for_b["ablation_dloss_mean"].to_numpy() == pytest.approx(importance[perm] * 2)  # mean of x and 3x, b's order
    assert (for_b["n_seeds"] == 2).all()
    assert seed_averaged_importance([a, b], "0")["ablation_dloss_mean"].to_numpy() == pytest.approx(importance * 2)
    (a.run_dir / "head_importance.parquet").unlink()
    assert seed_averaged_importance([a, b], "1").empty  # one seed left: not an average


def _movement_run(tmp_path, job, cum_grad, dist, entropy, importance):
    """A run whose last measurement has movement and entropy per head (4 heads, one layer)."""
    run_dir = tmp_path / job
    run_dir.mkdir()
    desc = np.arange(4 * len(DESCRIPTOR_METRICS), dtype=float).reshape(4, len(DESCRIPTOR_METRICS))
    per_layer = [{**{m: desc[:, i] for i, m in enumerate(DESCRIPTOR_METRICS)}, "role": np.zeros(4),
                  "cum_grad_norm": np.array(cum_grad), "dist_from_init": np.array(dist), "entropy_norm": np.array(entropy)}]
    metrics = head_metric_rows(job, 10, 0, per_layer)
    if importance is not None:
        head_metric_rows(job, 10, 0, [{"ablation_dloss": np.array(importance)}]).to_parquet(run_dir / "head_importance.parquet")
    return Run(job=job, run_dir=run_dir, status="completed", head_metrics=metrics)


def test_winners_move_farther_with_ablation_importance(tmp_path):
    """rho_*_ablation correlates movement with the measured importance, independently of the
    specificity proxy (here the proxy says the opposite)."""
    from headlab.sweep.heads import head_summary, winner_correlations

    cum_grad, dist = [1.0, 2.0, 3.0, 4.0], [4.0, 1.0, 3.0, 2.0]
    entropy = [0.1, 0.2, 0.3, 0.4]  # specificity 0.9 .. 0.6: falls as cum_grad rises
    importance = [0.01, 0.2, 0.3, 0.5]  # rises with cum_grad
    run = _movement_run(tmp_path, "0", cum_grad, dist, entropy, importance)
    heads = head_summary(run, final_importance(run.files))
    assert heads["ablation_dloss"].to_numpy() == pytest.approx(importance)
    rho = winner_correlations(heads)
    assert rho["rho_grad_ablation"] == pytest.approx(1.0) and rho["rho_grad_specificity"] == pytest.approx(-1.0)
    assert rho["rho_dist_ablation"] == pytest.approx(-0.4)  # Spearman of ranks [4,1,3,2] vs [1,2,3,4], by hand
    assert rho["rho_dist_specificity"] == pytest.approx(0.4)

    no_file = _movement_run(tmp_path, "1", cum_grad, dist, entropy, None)
    without = winner_correlations(head_summary(no_file, final_importance(no_file.files)))
    assert np.isnan(without["rho_grad_ablation"]) and np.isnan(without["rho_dist_ablation"])
    assert without["rho_grad_specificity"] == pytest.approx(-1.0)
