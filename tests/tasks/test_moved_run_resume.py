"""A run stopped mid-way, moved to another folder and resumed there ends as the run never stopped:
its best checkpoint tracking (score and file) moves with it, and the temporary file a kill during a
checkpoint write left behind is removed at the next start (issue 34.4 and 34.5)."""

from __future__ import annotations

import shutil

import pytest

from headlab.lit.checkpointing import RunCheckpoint
from headlab.lit.signals import RunInterrupted
from headlab.tasks.train import train
from tests._runs import RESUMABLE, compose_train_config

pytestmark = pytest.mark.slow
FINAL = ("val_acc", "val_f1", "val_loss", "test_acc", "test_f1", "test_loss", "best_step", "global_step", "final_roles")


def _stop_after_step(monkeypatch, step: int) -> None:
    """As if SIGTERM arrived during optimiser step `step`: RunCheckpoint saves last.ckpt there and stops."""
    original = RunCheckpoint.on_train_batch_end

    def stopping(self, trainer, *args):
        if trainer.global_step == step:
            self.signals.requested = "SIGTERM"
        original(self, trainer, *args)

    monkeypatch.setattr(RunCheckpoint, "on_train_batch_end", stopping)


def test_a_moved_run_resumes_to_the_uninterrupted_best_and_keeps_one_best_file(tmp_path, monkeypatch, one_thread):
    reference = train(compose_train_config(tmp_path / "reference", RESUMABLE))
    first = tmp_path / "first"
    with monkeypatch.context() as patch:
        _stop_after_step(patch, 12)  # after epoch 0's best checkpoint (step 10)
        with pytest.raises(RunInterrupted):
            train(compose_train_config(first, RESUMABLE))
    moved = tmp_path / "elsewhere" / "moved"
    shutil.move(first, moved)
    stale = moved / "checkpoints" / ".last.ckpt.k3_9xq2a.tmp.ckpt"  # a kill during a later checkpoint write
    stale.write_bytes(b"half a checkpoint")

    resumed = train(compose_train_config(moved, [*RESUMABLE, "resume=true"]))
    assert resumed["resumed_from"]["step"] == 12
    assert {k: resumed[k] for k in FINAL} == {k: reference[k] for k in FINAL}
    best = sorted(p.name for p in (moved / "checkpoints").glob("best-*.ckpt"))
    assert best == [reference["best_checkpoint"].rsplit("/", 1)[1]]  # on the parent commit: two best files
    assert resumed["best_checkpoint"] == str(moved / "checkpoints" / best[0])
    assert not stale.exists()
