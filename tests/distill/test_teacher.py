"""Which checkpoint of a teacher run dir is used, and what is not a teacher run dir."""

from __future__ import annotations

import json

import pytest

from headlab.distill.teacher import teacher_checkpoint
from headlab.errors import ConfigError


@pytest.fixture
def run_dir(tmp_path):
    root = tmp_path / "teacher"
    (root / "checkpoints").mkdir(parents=True)
    (root / "vocab.json").write_text("{}")
    (root / "checkpoints" / "last.ckpt").write_bytes(b"")
    (root / "checkpoints" / "best-epoch01-step000020.ckpt").write_bytes(b"")
    return root


def test_best_follows_the_summary_even_after_the_run_dir_moved(run_dir):
    moved_from = "/elsewhere/teacher/checkpoints/best-epoch01-step000020.ckpt"
    (run_dir / "summary.json").write_text(json.dumps({"best_checkpoint": moved_from}))
    assert teacher_checkpoint(run_dir, "best") == run_dir / "checkpoints" / "best-epoch01-step000020.ckpt"
    assert teacher_checkpoint(run_dir, "last") == run_dir / "checkpoints" / "last.ckpt"


def test_best_without_a_kept_best_is_the_last(run_dir):
    assert teacher_checkpoint(run_dir, "best") == run_dir / "checkpoints" / "last.ckpt"  # no summary.json


@pytest.mark.parametrize("damage, message", [
    (lambda root: (root / "vocab.json").unlink(), "no vocab.json"),
    (lambda root: (root / "checkpoints" / "last.ckpt").unlink(), "no checkpoints/last.ckpt"),
])
def test_an_incomplete_run_dir_is_a_config_error(run_dir, damage, message):
    damage(run_dir)
    with pytest.raises(ConfigError, match=message):
        teacher_checkpoint(run_dir, "last")


def test_minilm_is_named_as_not_built():
    with pytest.raises(ConfigError, match="MiniLM teacher is not built"):
        teacher_checkpoint("minilm")
