"""A refused resume leaves no trace: `resume=true` on a folder that is not there, or on a folder of other files,
is one line (exit 2), and Hydra's startup files (`.hydra/`, `train.log`, `.lock`) written for it are taken away
again: before, a missing folder was left created with them, and a folder of notes gained them."""

from __future__ import annotations

import sys

import pytest
from hydra.core.global_hydra import GlobalHydra

from tests._runs import TINY


def _train(monkeypatch, capsys, tmp_path, *overrides: str) -> tuple[int, list[str]]:
    from headlab.cli.train import main

    monkeypatch.setattr(sys, "argv", ["headlab-train", *TINY, *overrides, f"paths.log_dir={tmp_path / 'logs'}"])
    try:
        with pytest.raises(SystemExit) as exited:
            main()
    finally:
        GlobalHydra.instance().clear()
    return exited.value.code, capsys.readouterr().err.strip().splitlines()


def test_a_resume_of_a_missing_folder_leaves_no_folder(tmp_path, monkeypatch, capsys):
    run = tmp_path / "missing"
    code, err = _train(monkeypatch, capsys, tmp_path, "resume=true", f"hydra.run.dir={run}")
    assert code == 2 and len(err) == 1 and "checkpoints/last.ckpt does not exist" in err[0], err
    assert not run.exists()  # parent commit: missing/ with .hydra, .lock and train.log


def test_a_resume_of_a_folder_of_other_files_takes_its_own_files_away(tmp_path, monkeypatch, capsys):
    run = tmp_path / "notes"
    run.mkdir()
    (run / "notes.txt").write_text("mine\n")
    code, err = _train(monkeypatch, capsys, tmp_path, "resume=true", f"hydra.run.dir={run}")
    assert code == 2 and len(err) == 1, err
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]  # parent commit: + .hydra, .lock, train.log
    assert (run / "notes.txt").read_text() == "mine\n"
