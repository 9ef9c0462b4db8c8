"""A moved or copied run keeps its best-checkpoint tracking: ModelCheckpoint's saved state names the old
folder, and Lightning drops the best score and top-k when the folder differs (issue 34.5)."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from headlab.lit.checkpointing import RunCheckpoint

BEST = "best-epoch00-step000010.ckpt"


def _saved_state(folder):
    tracker = ModelCheckpoint(dirpath=folder, monitor="val/acc", mode="max", save_top_k=1)
    best = str(tracker.dirpath) + "/" + BEST
    tracker.best_model_path, tracker.best_model_score = best, torch.tensor(0.8)
    tracker.kth_best_model_path, tracker.kth_value, tracker.best_k_models = best, torch.tensor(0.8), {best: torch.tensor(0.8)}
    return tracker.state_dict()


def _restore(state, folder):
    """What Lightning does on resume: every on_load_checkpoint, then each callback's load_state_dict."""
    tracker = ModelCheckpoint(dirpath=folder, monitor="val/acc", mode="max", save_top_k=1)
    checkpoint = {"callbacks": {tracker.state_key: state}}
    RunCheckpoint().on_load_checkpoint(SimpleNamespace(checkpoint_callbacks=[tracker]), None, checkpoint)
    tracker.load_state_dict(checkpoint["callbacks"][tracker.state_key])
    return tracker


def test_a_moved_runs_best_score_and_path_follow_it_into_the_new_folder(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / BEST).write_bytes(b"weights")
    state = _saved_state(tmp_path / "a")
    shutil.move(tmp_path / "a", tmp_path / "b")
    tracker = _restore(state, tmp_path / "b")
    moved = str(tmp_path / "b" / BEST)
    assert tracker.best_model_score == pytest.approx(0.8)  # on the parent commit: None, so the next val is a "best"
    assert tracker.best_model_path == tracker.kth_best_model_path == moved
    assert list(tracker.best_k_models) == [moved]


def test_a_copy_without_the_best_file_starts_its_tracking_afresh(tmp_path):
    state = _saved_state(tmp_path / "a")  # the best file never reached the copy
    (tmp_path / "b").mkdir()
    tracker = _restore(state, tmp_path / "b")
    assert tracker.best_model_score is None and tracker.best_k_models == {}


def test_a_run_resumed_in_its_own_folder_is_left_as_lightning_restores_it(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / BEST).write_bytes(b"weights")
    state = _saved_state(tmp_path / "a")
    tracker = _restore(dict(state), tmp_path / "a")
    assert tracker.best_model_path == str(tmp_path / "a" / BEST) and tracker.best_model_score == pytest.approx(0.8)
