"""Checkpoints: written atomically, loaded without executing code, checked against the model on resume."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pytest
import torch

from headlab.tasks.train import train
from headlab.errors import ConfigError, HeadlabError
from headlab.lit.checkpointing import AtomicCheckpointIO, CheckpointError, load_checkpoint
from headlab.reload import load_network

SRC = Path(__file__).resolve().parents[2] / "src" / "headlab"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, compose_tiny):
    run = tmp_path_factory.mktemp("ckpt") / "run"
    train(compose_tiny(run, "callbacks.head_metrics.figures=false", "test=false"))
    return run


class _Payload:
    """Unpickling this would run code (create a marker file)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_every_torch_load_in_src_is_weights_only():
    calls = [(p, m.group(0)) for p in SRC.rglob("*.py") for m in re.finditer(r"torch\.load\([^)]*\)", p.read_text())]
    assert calls, "expected at least one torch.load"
    assert all("weights_only=True" in call for _, call in calls), calls
    assert not [p for p in SRC.rglob("*.py") if re.search(r"^\s*import pickle|^\s*from pickle", p.read_text(), re.M)]


@pytest.mark.parametrize("mmap", [False, True])  # True: how resume reads a checkpoint's metadata
def test_checkpoint_that_would_run_code_is_refused(tmp_path, mmap):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "payload": _Payload(str(marker))}, path)
    with pytest.raises(CheckpointError, match="cannot be read safely"):
        load_checkpoint(path, mmap=mmap)
    assert not marker.exists()


@pytest.mark.parametrize("mmap", [False, True])
def test_truncated_checkpoint_gives_a_clear_error(tmp_path, finished_run, mmap):
    data = (finished_run / "checkpoints" / "last.ckpt").read_bytes()
    path = tmp_path / "cut.ckpt"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"cut.ckpt: cannot be read safely \(truncated"):
        load_checkpoint(path, mmap=mmap)


def test_atomic_save_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "last.ckpt"
    io = AtomicCheckpointIO()
    io.save_checkpoint({"state_dict": {"w": torch.ones(2)}}, path)
    with pytest.raises(Exception):
        io.save_checkpoint({"state_dict": {}, "bad": lambda: None}, path)  # cannot be pickled
    assert torch.equal(io.load_checkpoint(path)["state_dict"]["w"], torch.ones(2))
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]  # no temporary file left behind


def test_resume_with_a_different_model_shape_names_the_mismatch(finished_run, compose_tiny):
    before = (finished_run / "summary.json").read_text()
    with pytest.raises(ConfigError) as info:
        train(compose_tiny(finished_run, "resume=true", "model.n_heads=4"))
    message = str(info.value)
    assert "model.n_heads=4" in message and "n_heads: checkpoint 2 vs config 4" in message
    assert (finished_run / "summary.json").read_text() == before  # nothing of the finished run is lost


def test_resume_from_a_damaged_checkpoint_is_a_headlab_error(tmp_path, compose_tiny):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.ckpt").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(HeadlabError, match="last.ckpt: cannot be read safely"):
        train(compose_tiny(run, "resume=true"))


def test_resume_auto_starts_fresh_without_a_checkpoint(tmp_path, compose_tiny):
    run = tmp_path / "run"
    summary = train(compose_tiny(run, "resume=auto", "callbacks.head_metrics.figures=false", "test=false"))
    assert summary["status"] == "completed" and "resumed_from" not in summary


def test_vocab_is_plain_json(finished_run):
    vocab = json.loads((finished_run / "vocab.json").read_text(encoding="utf-8"))
    assert vocab["tokens"][:3] == ["[PAD]", "[CLS]", "[UNK]"]
    with pytest.raises(Exception):
        pickle.loads((finished_run / "vocab.json").read_bytes())


def test_load_network_rebuilds_the_trained_weights(finished_run):
    """The network from last.ckpt has the checkpoint's weights and is ready for analysis (eval mode)."""
    path = finished_run / "checkpoints" / "last.ckpt"
    net = load_network(path)
    saved = load_checkpoint(path)["state_dict"]
    assert not net.training
    assert all(torch.equal(value, saved[f"net.{name}"]) for name, value in net.state_dict().items())


def test_load_network_refuses_a_checkpoint_without_a_model_config(tmp_path):
    path = tmp_path / "other.ckpt"
    torch.save({"state_dict": {"w": torch.ones(2)}}, path)
    with pytest.raises(CheckpointError, match="no headlab model_config"):
        load_network(path)
