"""summary.json says how many heads duplicate another at the end of training (issue: redundancy per run)."""

from __future__ import annotations

from headlab.analysis.redundancy import pair_table_redundancy
from headlab.tasks.train import train
from headlab.store import HEAD_PAIRS, read_table


def test_heads_that_stay_uniform_are_all_duplicates_and_the_summary_agrees_with_the_pair_table(tmp_path, tiny_config, one_thread):
    """A near-zero init leaves every head attending uniformly for 6 steps: each layer's 2 heads are one cluster."""
    run = tmp_path / "run"
    summary = train(tiny_config(run, "model.init_scale=0.001", "optim.lr=1e-6", "test=false",
                                "callbacks.head_metrics.figures=false"))
    assert summary["redundant_heads"] == 2 and summary["redundant_clusters"] == [[[0, 1]], [[0, 1]]]
    from_table = pair_table_redundancy(read_table(run / HEAD_PAIRS))
    assert from_table["redundant_heads"] == summary["redundant_heads"]


def test_heads_that_learned_different_patterns_are_not_duplicates(tmp_path, tiny_config, one_thread):
    run = tmp_path / "run"
    summary = train(tiny_config(run, "model.init_scale=2.0", "test=false", "callbacks.head_metrics.figures=false"))
    from_table = pair_table_redundancy(read_table(run / HEAD_PAIRS))
    assert summary["redundant_heads"] == from_table["redundant_heads"]
    assert summary["redundant_heads"] < 2
