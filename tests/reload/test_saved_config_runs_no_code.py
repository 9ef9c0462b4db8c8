"""A run directory is data: its saved config may name any `_target_`, and rebuilding the run's data
from it (headlab-importance, headlab-prune) must never call anything but headlab's own classes."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from headlab.reload.targets import is_headlab_class
from headlab.errors import HeadlabError
from headlab.reload import run_config
from headlab.store import RunDir


class _Payload:
    """Unpickling this creates the file `marker` (what an attacker's payload would do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _malicious_run(tmp_path: Path) -> tuple[Path, Path]:
    run, marker = tmp_path / "run", tmp_path / "PWNED"
    (run / "segments" / "0").mkdir(parents=True)
    (run / "checkpoints").mkdir()
    with open(run / "payload.pkl", "wb") as f:
        pickle.dump(_Payload(marker), f)
    (run / "segments" / "0" / "config.yaml").write_text(
        f"data:\n  _target_: pandas.read_pickle\n  filepath_or_buffer: {run / 'payload.pkl'}\nmodel:\n  n_heads: 2\n")
    return run, marker


def test_payload_really_creates_the_file(tmp_path):
    """The fixture is a real threat: building the saved data node as Hydra would runs the payload."""
    import hydra
    from omegaconf import OmegaConf

    run, marker = _malicious_run(tmp_path)
    hydra.utils.instantiate(OmegaConf.load(run / "segments" / "0" / "config.yaml").data)
    assert marker.exists()


def test_saved_config_with_foreign_target_is_refused(tmp_path):
    run, marker = _malicious_run(tmp_path)
    with pytest.raises(HeadlabError, match=r"data\._target_='pandas.read_pickle'.*headlab"):
        run_config(RunDir(run))
    assert not marker.exists()


@pytest.mark.parametrize("command", ["headlab.cli.importance", "headlab.cli.prune"])
def test_commands_refuse_it_in_one_line(tmp_path, command, capfd):
    import importlib

    run, marker = _malicious_run(tmp_path)
    capfd.readouterr()
    assert importlib.import_module(command).main([f"run_dir={run}"]) == 2
    stderr = capfd.readouterr().err
    assert len(stderr.strip().splitlines()) == 1 and "pandas.read_pickle" in stderr, stderr[-2000:]
    assert not marker.exists()


def test_nested_target_and_attribute_escape_are_refused(tmp_path):
    run, marker = _malicious_run(tmp_path)
    (run / "segments" / "0" / "config.yaml").write_text(
        "data:\n  _target_: headlab.data.TextDataModule\n  source:\n    _target_: headlab.os.system\n"
        f"    command: touch {marker}\nmodel: {{}}\n")
    with pytest.raises(HeadlabError, match="headlab.os.system"):
        run_config(RunDir(run))
    assert not marker.exists()


@pytest.mark.parametrize("target, allowed", [("headlab.data.TextDataModule", True), ("headlab.os.system", False),
                                             ("os.system", False), ("headlab.tasks.build.instantiate", False),
                                             ("builtins.eval", False), (None, False)])
def test_is_headlab_class(target, allowed):
    assert is_headlab_class(target) is allowed


@pytest.mark.parametrize("text, problem", [("data: [unclosed\n", "cannot be read"), ("model: {}\n", "lacks the data"),
                                           ("- a\n- b\n", "not a mapping")])
def test_broken_saved_config_is_one_error(tmp_path, text, problem):
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text(text)
    with pytest.raises(HeadlabError, match=problem):
        run_config(RunDir(run))
