"""A SIGTERM that arrives while a run is being set up (the resume's checkpoint being read, the trainer being built)
is a clean stop at training start, exit 143 with the resume line, never another error: raised inside the setup,
a library's `except Exception` turned it into "checkpoint ... cannot be read safely: interrupted by SIGTERM" (exit 2)
or Hydra's instantiation error (exit 1), as the random-instant kill test found."""

from __future__ import annotations

import os
import signal

import pytest
import torch

from headlab.lit.checkpointing import AtomicCheckpointIO, RunCheckpoint
from headlab.lit.signals import RunInterrupted
from headlab.store import RunDir
from headlab.tasks.train import train
from tests._runs import RESUMABLE, compose_train_config

pytestmark = pytest.mark.slow  # three tiny trainings in this process: ~15 s on a shared CPU


def test_a_sigterm_while_the_resume_reads_its_checkpoint_stops_at_training_start(tmp_path, monkeypatch, one_thread):
    run = tmp_path / "run"
    batch_end = RunCheckpoint.on_train_batch_end

    def stop_at_3(self, trainer, *args):
        if trainer.global_step == 3:
            self.signals.requested = "SIGTERM"
        batch_end(self, trainer, *args)

    with monkeypatch.context() as m:
        m.setattr(RunCheckpoint, "on_train_batch_end", stop_at_3)
        with pytest.raises(RunInterrupted):
            train(compose_train_config(run, RESUMABLE))

    real_load, restore, sent = torch.load, AtomicCheckpointIO.load_checkpoint, []

    def load_with_a_sigterm(*args, **kwargs):  # the signal lands inside headlab's safe reader of last.ckpt
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)
        return real_load(*args, **kwargs)

    def restoring(self, *args, **kwargs):
        with monkeypatch.context() as m:
            m.setattr(torch, "load", load_with_a_sigterm)
            return restore(self, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(AtomicCheckpointIO, "load_checkpoint", restoring)
        with pytest.raises(RunInterrupted) as stopped:  # parent commit: CheckpointError "cannot be read safely"
            train(compose_train_config(run, [*RESUMABLE, "resume=true"]))
    assert sent and stopped.value.step == 3 and stopped.value.exit_code == 143
    assert RunDir(run).summary["status"] == "interrupted"
    assert train(compose_train_config(run, [*RESUMABLE, "resume=true"]))["status"] == "completed"
