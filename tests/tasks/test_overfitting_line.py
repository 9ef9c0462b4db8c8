"""The end-of-run overfitting warning: validation loss rose after a best checkpoint in the run's first half."""

from __future__ import annotations

from headlab.tasks.summary import overfitting_line


def _summary(best_step, steps, best_loss, last_loss):
    return {"best_step": best_step, "global_step": steps, "best": {"val_loss": best_loss}, "last": {"val_loss": last_loss}}


def test_a_best_checkpoint_early_with_the_loss_rising_after_it_is_named():
    line = overfitting_line(_summary(735, 3000, 2.41, 3.9))  # the issue's own-text LM: best at 735 of 3,000
    assert line.startswith("overfitting: validation loss was lowest at step 735 of 3000 (2.41) and ended at 3.9")


def test_no_warning_when_the_best_is_late_the_loss_did_not_rise_or_a_value_is_missing():
    assert overfitting_line(_summary(1600, 3000, 2.41, 3.9)) is None      # second half: still improving late
    assert overfitting_line(_summary(1500, 3000, 2.41, 3.9)) is not None  # exactly half: the first half
    assert overfitting_line(_summary(700, 3000, 2.41, 2.41)) is None       # flat after it
    assert overfitting_line({"best_step": 10, "global_step": 100, "best": {}, "last": {"val_loss": 3.0}}) is None
    assert overfitting_line({}) is None
