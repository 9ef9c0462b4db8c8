"""`checkpoints/last.ckpt` is always the newest completed state, even when val/acc never improves
(issue 16.1: with ModelCheckpoint's `save_last` + `monitor`, it stayed at the best step)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from headlab.tasks.train import train
from headlab.lit.checkpointing import load_checkpoint
from headlab.store import read_table
from tests._runs import cli_command, cli_env, run_cli, summary

# lr 1e-9: the weights barely move, so val/acc after epoch 1 equals epoch 0's and is never a new best
PLATEAU = ("optim.lr=1e-9", "trainer.max_epochs=3", "callbacks.head_metrics.figures=false", "test=false")


def test_last_checkpoint_is_the_final_step_when_val_acc_plateaus(tmp_path, tiny_config):
    run = tmp_path / "run"
    result = train(tiny_config(run, *PLATEAU))
    assert result["global_step"] == 18  # 3 epochs x 6 batches
    assert result["best_step"] == 6  # epoch 0: the later epochs only tie, which is no improvement
    last = load_checkpoint(run / "checkpoints" / "last.ckpt", mmap=True)
    assert last["global_step"] == 18 and last["epoch"] == 2
    assert result["last_checkpoint"] == str(run / "checkpoints" / "last.ckpt")
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best-epoch00-step000006.ckpt", "last.ckpt"]


# 3 epochs x 10 steps, heads measured at every step (slow enough to kill inside the last epoch),
# last.ckpt only at epoch ends (the default): the case where it used to stay at step 10.
PLATEAU_CLI = [
    "data=synthetic", "data.synthetic.n=800", "data.probe_size=32", "data.batch_size=32",
    "model.d_model=32", "model.n_heads=2", "model.n_layers=2", "optim.lr=1e-9",
    "trainer.max_epochs=3", "trainer.limit_train_batches=10", "trainer.deterministic=true", "trainer.log_every_n_steps=2",
    "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false", "callbacks.progress_bar=null",
    "callbacks.head_metrics.every_n_steps=1", "callbacks.head_metrics.early_steps=0", "callbacks.head_metrics.figures=false",
]
FINAL = ("val_acc", "val_f1", "val_loss", "test_acc", "test_f1", "test_loss", "best_step", "global_step", "final_roles")


def _last_step(path: Path) -> int:
    try:
        return int(torch.load(path, map_location="cpu", weights_only=True, mmap=True)["global_step"])
    except (OSError, RuntimeError, KeyError):  # not there yet
        return -1


@pytest.mark.slow
def test_run_killed_in_its_last_epoch_resumes_from_the_last_epoch_end(tmp_path):
    reference = tmp_path / "reference"
    assert run_cli(tmp_path, *PLATEAU_CLI, f"hydra.run.dir={reference}").returncode == 0

    run = tmp_path / "run"
    process = subprocess.Popen(cli_command(*PLATEAU_CLI, f"hydra.run.dir={run}"), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=cli_env(tmp_path), cwd=tmp_path)
    try:
        while _last_step(run / "checkpoints" / "last.ckpt") < 20:  # end of epoch 1 of 0..2
            assert process.poll() is None, "the run ended without writing last.ckpt at the end of epoch 1"
            time.sleep(0.01)
        process.kill()
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert summary(run)["status"] == "running"  # died without a word, inside epoch 2

    result = run_cli(tmp_path, *PLATEAU_CLI, "resume=true", f"hydra.run.dir={run}")
    assert result.returncode == 0, result.stderr[-3000:]
    got, want = summary(run), summary(reference)
    assert got["resumed_from"]["step"] == 20  # not the best step (10): no finished epoch is trained twice
    assert {k: got[k] for k in FINAL} == {k: want[k] for k in FINAL}
    resumed = read_table(run / "head_metrics.parquet").drop(columns="run_id")
    pd.testing.assert_frame_equal(resumed, read_table(reference / "head_metrics.parquet").drop(columns="run_id"),
                                  check_exact=True)
    assert _last_step(run / "checkpoints" / "last.ckpt") == _last_step(reference / "checkpoints" / "last.ckpt") == 30
