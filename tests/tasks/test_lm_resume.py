"""Kill a REAL induction-LM training after its first checkpoint, resume it, and get the uninterrupted
run: the same final metrics and the same head_metrics rows, including each head's summed gradient norm
and distance from init, which live in the LM callback's checkpointed state."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from headlab.store import read_table
from tests._runs import cli_command, cli_env, run_cli, summary

pytestmark = pytest.mark.slow

LM = ["experiment=induction", "trainer.max_steps=60", "data.n_train=1920", "data.n_eval=64", "data.probe_size=8",
      "callbacks.lm_metrics.every_n_steps=10", "callbacks.lm_metrics.standard_probe_size=0",
      "callbacks.checkpoint.every_n_train_steps=20", "trainer.deterministic=true", "trainer.enable_progress_bar=false",
      "trainer.enable_model_summary=false", "threads=1", "figures=false", "model.n_heads=2"]
FINAL = ("val_acc", "val_loss", "test_acc", "test_loss", "best_step", "global_step")
KEYS = ["step", "layer", "head", "metric"]


def test_a_killed_lm_run_resumes_to_the_uninterrupted_one(tmp_path):
    reference = tmp_path / "reference"
    done = run_cli(tmp_path, *LM, f"hydra.run.dir={reference}")
    assert done.returncode == 0, done.stderr[-2000:]
    run = tmp_path / "run"
    process = subprocess.Popen(cli_command(*LM, f"hydra.run.dir={run}"), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=cli_env(tmp_path), cwd=tmp_path)
    try:
        while not (run / "checkpoints" / "last.ckpt").is_file():
            assert process.poll() is None, "the run ended before its first checkpoint"
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    resumed = run_cli(tmp_path, *LM, f"hydra.run.dir={run}", "resume=true")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    got, want = summary(run), summary(reference)
    assert got["status"] == "completed" and {k: got[k] for k in FINAL} == {k: want[k] for k in FINAL}
    a = read_table(run / "head_metrics.parquet").drop(columns="run_id").sort_values(KEYS, ignore_index=True)
    b = read_table(reference / "head_metrics.parquet").drop(columns="run_id").sort_values(KEYS, ignore_index=True)
    assert not a.duplicated(KEYS).any() and {"cum_grad_norm", "dist_from_init"} <= set(a["metric"])
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    pair_keys = ["step", "layer", "head_a", "head_b", "metric"]  # the head-pair table: re-measured, never doubled
    a = read_table(run / "head_pairs.parquet").drop(columns="run_id").sort_values(pair_keys, ignore_index=True)
    b = read_table(reference / "head_pairs.parquet").drop(columns="run_id").sort_values(pair_keys, ignore_index=True)
    assert not a.duplicated(pair_keys).any()
    pd.testing.assert_frame_equal(a, b, check_exact=True)
