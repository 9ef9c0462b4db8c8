"""Output folders that cannot be made are one line before Hydra makes anything (issue 34.2): a
`hydra.run.dir` that is a file or lies under one, a log folder (HEADLAB_LOG_DIR) that is a file or sits
on a pseudo file system. Hydra's own answer was a FileExistsError / NotADirectoryError traceback."""

from __future__ import annotations

import sys

import pytest

from headlab.cli.train import main


def _error_line(monkeypatch, capsys, *args: str) -> str:
    monkeypatch.setattr(sys, "argv", ["headlab-train", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    return err[0]


@pytest.fixture
def afile(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADLAB_LOG_DIR", str(tmp_path / "logs"))
    path = tmp_path / "afile"
    path.write_text("not a folder")
    return path


def test_a_run_dir_that_is_a_file_or_under_one_is_one_line(afile, monkeypatch, capsys):
    assert _error_line(monkeypatch, capsys, f"hydra.run.dir={afile}") == (
        f"headlab-train: error: {afile}: cannot be written: it is a file, not a folder")
    assert _error_line(monkeypatch, capsys, f"hydra.run.dir={afile}/sub") == (
        f"headlab-train: error: {afile}/sub: cannot be written: {afile} is a file, not a folder")
    assert _error_line(monkeypatch, capsys, "-m", f"hydra.sweep.dir={afile}/sweep", "seed=1,2") == (
        f"headlab-train: error: {afile}/sweep: cannot be written: {afile} is a file, not a folder")
    assert afile.read_text() == "not a folder"


def test_a_log_dir_that_is_a_file_or_cannot_be_made_is_one_line(afile, monkeypatch, capsys):
    monkeypatch.setenv("HEADLAB_LOG_DIR", str(afile))
    assert _error_line(monkeypatch, capsys) == f"headlab-train: error: {afile}: cannot be written: it is a file, not a folder"
    monkeypatch.setenv("HEADLAB_LOG_DIR", "/proc/headlab-logs")
    assert _error_line(monkeypatch, capsys).startswith(  # the cause as this kernel words it (ENOENT, EACCES)
        "headlab-train: error: /proc/headlab-logs: cannot be written: /proc takes no new entries: ")
    assert _error_line(monkeypatch, capsys, f"paths.log_dir={afile}/logs").endswith(f"{afile} is a file, not a folder")
