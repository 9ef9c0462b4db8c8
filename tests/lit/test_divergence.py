"""A diverging run stops with a clear message naming the step, keeps the last good checkpoint,
writes status "diverged" and exits 3; in a multirun the other jobs still run."""

from __future__ import annotations

import math

import pytest
import torch

from tests._runs import RESUMABLE, run_cli, summary, train_in_process

DIVERGE = [*RESUMABLE, "optim.lr=1e6", "optim.warmup_steps=0", "callbacks.checkpoint.every_n_train_steps=1"]


def test_absurd_lr_diverges_with_status_step_and_exit_code_3(tmp_path, monkeypatch, capfd):
    run = tmp_path / "run"
    result = train_in_process(tmp_path, monkeypatch, capfd, *DIVERGE, f"hydra.run.dir={run}")
    assert result.returncode == 3, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("headlab-train:")]
    assert len(lines) == 1 and lines[0].startswith("headlab-train: diverged:")
    facts = summary(run)
    assert facts["status"] == "diverged"
    step = facts["diverged_step"]
    assert f"at step {step}" in lines[0] and f"at step {step}" in facts["error"]
    # the last checkpoint on disk is a good one: written before the divergence, every weight finite
    assert facts["last_checkpoint"] == str(run / "checkpoints" / "last.ckpt")
    checkpoint = torch.load(facts["last_checkpoint"], map_location="cpu", weights_only=True)
    assert checkpoint["global_step"] <= step
    assert all(torch.isfinite(v).all() for v in checkpoint["state_dict"].values() if v.is_floating_point())


@pytest.mark.slow
def test_multirun_goes_on_after_a_diverged_job_and_exits_non_zero(tmp_path):
    sweep = tmp_path / "sweep"
    result = run_cli(tmp_path, "-m", *DIVERGE[:-3], "optim.lr=1e6,1e-3", "optim.warmup_steps=0",
                     "trainer.max_epochs=1", f"hydra.sweep.dir={sweep}")
    assert result.returncode != 0
    statuses = {summary(sweep / str(i))["swept"]["optim.lr"]: summary(sweep / str(i))["status"] for i in (0, 1)}
    assert statuses == {1e6: "diverged", 1e-3: "completed"}
    assert not math.isnan(summary(sweep / "1")["val_acc"])
