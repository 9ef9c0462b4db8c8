"""`headlab-aggregate`: what it prints and its exit codes."""

from __future__ import annotations

import subprocess
import sys

from headlab.cli.aggregate import main


def test_prints_what_it_wrote_and_what_it_skipped(sweep_dir, tmp_path, capsys):
    assert main([str(sweep_dir), "--out", str(tmp_path / "out"), "--no-figures"]) == 0
    out = capsys.readouterr().out
    assert f"wrote {tmp_path / 'out' / 'sweep_summary.csv'}" in out
    assert "5 of 10 runs aggregated (accuracy and F1: each run's best checkpoint (by val/acc); roles and head metrics: " \
        "its last measurement)" in out
    for job, word in (("3", "missing"), ("4", "running"), ("7", "failed"), ("8", "unreadable"), ("9", "unreadable")):
        assert f"skipped job {job} " in out and word in out.split(f"skipped job {job} ")[1].splitlines()[0]


def test_folder_with_only_failed_jobs_exits_1(tmp_path, capsys):
    from .conftest import write_job

    write_job(tmp_path / "sw", 0, 2, 0, "failed", error="bad override")
    assert main([str(tmp_path / "sw"), "--no-figures"]) == 1
    captured = capsys.readouterr()
    assert "skipped job 0" in captured.out and "no usable run" in captured.err


def test_missing_or_empty_folder_is_one_line_and_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "nope")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "no such directory" in captured.err
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty")]) == 2
    assert "no job directories" in capsys.readouterr().err
    assert list((tmp_path / "empty").iterdir()) == []  # nothing written into a folder that is not a sweep


def test_console_entry_point_has_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "headlab.cli.aggregate", str(tmp_path / "nope")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("headlab-aggregate: error:")
