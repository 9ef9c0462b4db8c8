"""Classes of mistakes that gave a traceback, a misleading message or silence: each is one line now."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from headlab.tasks.train_config import validate_config
from headlab.distill.teacher import teacher_checkpoint
from headlab.errors import ConfigError
from headlab.store import RunDir


@pytest.mark.parametrize("override, key", [("optim.lr=inf", "optim.lr"), ("optim.lr=nan", "optim.lr"),
                                           ("optim.weight_decay=-inf", "optim.weight_decay"),
                                           ("model.init_scale=inf", "model.init_scale")])
def test_non_finite_numbers_are_refused(tiny_config, tmp_path, override, key):
    try:
        cfg = tiny_config(tmp_path / "run", override)
    except ConfigError as err:  # refused at composition already: also one line
        assert key in str(err)
        return
    with pytest.raises(ConfigError, match=rf"{key}=.*a finite number"):
        validate_config(cfg)  # on the parent commit: optim.lr=inf trains and diverges


def test_gpu_accelerator_without_a_gpu_is_one_line(tiny_config, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ConfigError, match="trainer.accelerator='gpu'.*no GPU found"):
        validate_config(tiny_config(tmp_path / "run", "trainer.accelerator=gpu"))


def _run_with_best(path: Path, best: Path, last: bool) -> Path:
    (path / "checkpoints").mkdir(parents=True)
    (path / "vocab.json").write_text("{}")
    (path / "summary.json").write_text(json.dumps({"status": "completed", "best_checkpoint": str(best)}))
    if last:
        (path / "checkpoints" / "last.ckpt").write_bytes(b"x")
    return path


def test_a_summary_never_points_a_run_at_another_runs_checkpoint(tmp_path):
    other = tmp_path / "other" / "checkpoints" / "best-epoch=0.ckpt"
    other.parent.mkdir(parents=True)
    other.write_bytes(b"another run's weights")
    copied = _run_with_best(tmp_path / "copied", other, last=False)
    assert RunDir(copied).best_checkpoint() is None  # on the parent commit: the other run's file
    with pytest.raises(ConfigError, match="no checkpoints/last.ckpt"):
        teacher_checkpoint(copied, "best")
    own = copied / "checkpoints" / other.name
    own.write_bytes(b"its own")
    assert RunDir(copied).best_checkpoint() == own


def test_reproduce_reports_are_ignored_by_git():
    ignored = (Path(__file__).parents[2] / ".gitignore").read_text().splitlines()
    assert "/reports/" in ignored


def test_a_recorded_checkpoint_path_resolves_to_the_runs_own_copy(tmp_path):
    original = _run_with_best(tmp_path / "a", tmp_path / "a" / "checkpoints" / "best-epoch00-step000010.ckpt", last=True)
    (original / "checkpoints" / "best-epoch00-step000010.ckpt").write_bytes(b"a's weights")
    import shutil

    moved = Path(shutil.copytree(original, tmp_path / "b"))
    recorded = str(original / "checkpoints" / "best-epoch00-step000010.ckpt")  # what a's callback state and summary hold
    assert RunDir(moved).own_checkpoint(recorded) == moved / "checkpoints" / "best-epoch00-step000010.ckpt"
    assert RunDir(moved).own_checkpoint(str(tmp_path / "elsewhere.ckpt")) is None
