"""`+callbacks.checkpoint.keep_every_n_train_steps=N`: a kept checkpoint every N steps, so
`headlab-importance RUN checkpoint=all` measures importance over training."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from headlab.cli.importance import main as importance_main
from headlab.reload import build_datamodule, load_network, run_config
from headlab.tasks.train import train
from headlab.errors import ConfigError
from headlab.lit.checkpointing import RunCheckpoint, load_checkpoint
from headlab.store import RunDir
from tests._runs import gated_val_loss

QUIET = ("callbacks.head_metrics.figures=false", "test=false", "threads=1")


def test_kept_checkpoints_at_every_nth_step_and_importance_at_each(tmp_path, tiny_config):
    run = tmp_path / "run"
    threads = torch.get_num_threads()
    try:
        result = train(tiny_config(run, "+callbacks.checkpoint.keep_every_n_train_steps=2", *QUIET))
        assert result["global_step"] == 6
        names = sorted(p.name for p in (run / "checkpoints").iterdir())
        assert names == ["best-epoch00-step000006.ckpt", "last.ckpt", "step000002.ckpt", "step000004.ckpt", "step000006.ckpt"]
        for step in (2, 4, 6):
            assert load_checkpoint(run / "checkpoints" / f"step{step:06d}.ckpt", mmap=True)["global_step"] == step
        # the kept step-6 file holds the weights last.ckpt holds; step 2's differ (training moved them)
        last = load_checkpoint(run / "checkpoints" / "last.ckpt")["state_dict"]
        six = load_checkpoint(run / "checkpoints" / "step000006.ckpt")["state_dict"]
        two = load_checkpoint(run / "checkpoints" / "step000002.ckpt")["state_dict"]
        weights = [k for k in last if k.startswith("net.")]  # (metric states are reset at the epoch end)
        assert weights and all(torch.equal(last[k], six[k]) for k in weights)
        assert any(not torch.equal(last[k], two[k]) for k in weights)

        assert importance_main([str(run), "checkpoint=all", "importance.curves=false", "importance.figures=false",
                                "importance.threads=1"]) == 0
        table = pd.read_parquet(run / "head_importance.parquet")
        assert sorted(table.step.unique()) == [2, 4, 6]
        assert not table.duplicated(["step", "layer", "head", "metric"]).any()

        # step 2's ablation row is the step-2 network's, computed independently of the tool
        net = load_network(run / "checkpoints" / "step000002.ckpt")
        loader = build_datamodule(run_config(RunDir(run))).val_dataloader()

        with torch.no_grad():
            gates = torch.ones(2, 2)
            gates[0, 1] = 0.0
            expected = gated_val_loss(net, loader, gates) - gated_val_loss(net, loader, torch.ones(2, 2))
        got = table[(table.step == 2) & (table.metric == "ablation_dloss") & (table.layer == 0) & (table["head"] == 1)]
        assert got.value.item() == pytest.approx(expected, abs=1e-5)
    finally:
        torch.set_num_threads(threads)


def test_resume_reads_last_and_keeps_counting(tmp_path, tiny_config):
    run = tmp_path / "run"
    threads = torch.get_num_threads()
    try:
        train(tiny_config(run, "+callbacks.checkpoint.keep_every_n_train_steps=4", *QUIET))
        result = train(tiny_config(run, "+callbacks.checkpoint.keep_every_n_train_steps=4", "trainer.max_epochs=2",
                                   "resume=true", *QUIET))
    finally:
        torch.set_num_threads(threads)
    assert result["global_step"] == 12  # continued from last.ckpt (step 6), not from the kept step 4
    kept = sorted(p.name for p in (run / "checkpoints").glob("step*.ckpt"))
    assert kept == ["step000004.ckpt", "step000008.ckpt", "step000012.ckpt"]
    assert load_checkpoint(run / "checkpoints" / "step000004.ckpt", mmap=True)["global_step"] == 4


@pytest.mark.parametrize("value", [0, -3, True, 2.5])
def test_bad_keep_value_is_a_config_error(value):
    with pytest.raises(ConfigError, match="callbacks.checkpoint.keep_every_n_train_steps"):
        RunCheckpoint(keep_every_n_train_steps=value)
