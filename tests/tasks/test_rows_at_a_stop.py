"""A run stopped right after its checkpoint (SIGTERM; or SIGKILL in the millisecond after the file appears) keeps
every metrics.csv row: Lightning logs a step's train row (train/loss) after the hook that saves last.ckpt, and an
epoch's (train/acc) after the epoch-end save, and a resume never runs that step or epoch end again. The random-instant
kill test lost such rows (steps 15 and 17 after SIGTERMs at steps 16 and 18)."""

from __future__ import annotations

import pandas as pd
import pytest

from headlab.lit.checkpointing import RunCheckpoint
from headlab.lit.signals import RunInterrupted
from headlab.tasks.train import train
from tests._runs import RESUMABLE, compose_train_config

pytestmark = pytest.mark.slow  # four tiny trainings per test in this process: ~20 s each on a shared CPU


def _cells(run) -> pd.DataFrame:
    """metrics.csv as sorted (step, column, value) cells (wall-clock columns aside)."""
    rows = pd.read_csv(run / "metrics.csv")
    long = rows.melt(id_vars=["step"], var_name="column", value_name="value").dropna()
    long = long[~long["column"].str.contains("time|_s$")]
    return long.sort_values(["step", "column", "value"]).reset_index(drop=True)


def test_a_stop_at_a_step_end_and_at_an_epoch_end_loses_no_row(tmp_path, monkeypatch, one_thread):
    reference = tmp_path / "reference"
    train(compose_train_config(reference, RESUMABLE))
    run = tmp_path / "run"
    batch_end, epoch_end = RunCheckpoint.on_train_batch_end, RunCheckpoint.on_train_epoch_end

    def at_step_4(self, trainer, *args):  # SIGTERM during step 4, whose train row (step 3) is due
        if trainer.global_step == 4:
            self.signals.requested = "SIGTERM"
        batch_end(self, trainer, *args)

    def at_epoch_0_end(self, trainer, *args):  # SIGTERM during epoch 0's validation
        if trainer.current_epoch == 0:
            self.signals.requested = "SIGTERM"
        epoch_end(self, trainer, *args)

    for patch, step in ((("on_train_batch_end", at_step_4)), 4), ((("on_train_epoch_end", at_epoch_0_end)), 10):
        with monkeypatch.context() as m:
            m.setattr(RunCheckpoint, *patch)
            with pytest.raises(RunInterrupted) as stopped:
                train(compose_train_config(run, [*RESUMABLE, *(["resume=true"] if step > 4 else [])]))
        assert stopped.value.step == step
    train(compose_train_config(run, [*RESUMABLE, "resume=true"]))
    pd.testing.assert_frame_equal(_cells(run), _cells(reference))  # parent commit: steps 3 and 9 (train/acc) lost


def test_a_stop_during_an_epochs_last_batch_waits_for_the_epoch_end_and_resumes_exactly(tmp_path, monkeypatch, one_thread):
    """SIGTERM during step 10, the last batch of epoch 0: the stop waits for the epoch's validation and epoch-end
    save. Saved at the batch end instead, the resume skipped epoch 0's best checkpoint (best step 20, not 10), and
    after a second stop at step 12 trained epoch 1 for 12 batches (global step 22 of 20)."""
    want = train(compose_train_config(tmp_path / "reference", RESUMABLE))
    run = tmp_path / "run"
    batch_end = RunCheckpoint.on_train_batch_end
    for i, step in enumerate((10, 12)):
        def stopping(self, trainer, *args, step=step):
            if trainer.global_step == step:
                self.signals.requested = "SIGTERM"
            batch_end(self, trainer, *args)

        with monkeypatch.context() as m:
            m.setattr(RunCheckpoint, "on_train_batch_end", stopping)
            with pytest.raises(RunInterrupted) as stopped:
                train(compose_train_config(run, [*RESUMABLE, *(["resume=true"] if i else [])]))
        assert stopped.value.step == step
    got = train(compose_train_config(run, [*RESUMABLE, "resume=true"]))
    keys = ("global_step", "best_step", "val_acc", "val_f1", "test_acc", "test_f1", "final_roles")
    assert {k: got[k] for k in keys} == {k: want[k] for k in keys}  # parent commit: global_step 22, best_step 22
    pd.testing.assert_frame_equal(_cells(run), _cells(tmp_path / "reference"))
