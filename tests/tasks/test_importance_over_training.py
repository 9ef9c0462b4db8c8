"""callbacks.head_metrics.importance=true: grad_importance at every measurement, in the run's tables and figure."""

from __future__ import annotations

import pytest
import torch

from headlab.reload import build_datamodule, load_network, run_config
from headlab.tasks.train import train
from headlab.interventions import gradient_importance
from headlab.plots.trajectories import build_metric_trajectories_figure
from headlab.store import RunDir, read_table


def test_gradient_importance_is_measured_at_every_step_and_plotted(tmp_path, tiny_config):
    run = tmp_path / "run"
    threads = torch.get_num_threads()
    try:
        train(tiny_config(run, "+callbacks.head_metrics.importance=true", "callbacks.head_metrics.figures=false",
                          "test=false", "threads=1"))
        metrics = read_table(run / "head_metrics.parquet")
        grad = metrics[metrics.metric == "grad_importance"]
        assert sorted(grad.step.unique()) == sorted(metrics.step.unique())  # every measurement point
        assert len(grad) == metrics.step.nunique() * 2 * 2 and (grad.value > 0).all()

        # the last measurement is of the network last.ckpt holds: recompute it independently of the callback
        net = load_network(run / "checkpoints" / "last.ckpt")
        probe = build_datamodule(run_config(RunDir(run))).probe_set()
        batches = [{k: b[k] for k in ("input_ids", "attention_mask", "labels")} for b in probe.batches(64)]
        expected = gradient_importance(net, batches)
        last = grad[grad.step == grad.step.max()].sort_values(["layer", "head"]).value.to_numpy()
        assert last == pytest.approx(expected.flatten().numpy(), rel=1e-4)
    finally:
        torch.set_num_threads(threads)

    fig = build_metric_trajectories_figure(metrics)
    assert any(ax.get_ylabel() == "grad_importance" for ax in fig.axes)
