"""`headlab-aggregate`: what it prints and its exit codes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from headlab.cli.aggregate import main


def test_prints_what_it_wrote_and_what_it_skipped(sweep_dir, tmp_path, capsys):
    assert main([str(sweep_dir), f"out={tmp_path / 'out'}", "figures=false"]) == 0
    out = capsys.readouterr().out
    assert f"wrote {tmp_path / 'out' / 'sweep_summary.csv'}" in out
    assert "5 of 10 runs aggregated (accuracy and F1: each run's best checkpoint (by val/acc); roles and head metrics: " \
        "its last measurement)" in out
    for job, word in (("3", "missing"), ("4", "running"), ("7", "failed"), ("8", "unreadable"), ("9", "unreadable")):
        assert f"skipped job {job} " in out and word in out.split(f"skipped job {job} ")[1].splitlines()[0]
    assert not (sweep_dir / "view.html").exists()  # the page comes with the figures


@pytest.mark.slow  # seaborn figures of the whole sweep: ~20 s on 2 busy cores
def test_with_figures_the_command_writes_the_sweeps_page(sweep_dir, tmp_path, capsys):
    assert main([str(sweep_dir), f"out={tmp_path / 'out'}"]) == 0
    assert f"wrote {sweep_dir / 'view.html'}" in capsys.readouterr().out
    assert "<html" in (sweep_dir / "view.html").read_text(encoding="utf-8").lower()


def test_folder_with_only_failed_jobs_exits_1(tmp_path, capsys):
    from .conftest import write_job

    write_job(tmp_path / "sw", 0, 2, 0, "failed", error="bad override")
    assert main([str(tmp_path / "sw"), "figures=false"]) == 1
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


# ---------------------------------------------------------------- a Hydra app: config, help, short forms

def _printed_config(capsys, *args: str) -> dict:
    import yaml

    assert main([*args, "--cfg", "job"]) == 0
    return yaml.safe_load(capsys.readouterr().out)


def test_cfg_job_prints_the_schema_defaults_and_help_names_the_short_forms(capsys):
    assert _printed_config(capsys, "sweep_dir=s") == {"sweep_dir": "s", "out": None, "figures": True}
    with pytest.raises(SystemExit) as exited:  # Hydra's --help exits itself
        main(["--help"])
    assert exited.value.code == 0
    printed = capsys.readouterr().out
    assert printed.startswith("headlab-aggregate SWEEP_DIR [out=DIR] [figures=false]: ")
    assert "SWEEP_DIR = sweep_dir=SWEEP_DIR" in printed
    assert all(f"\n{key}: " in printed for key in ("sweep_dir", "out", "figures"))


def test_the_leading_path_composes_what_sweep_dir_does(capsys):
    short = _printed_config(capsys, "my sweeps/a", "out='o,1'", "figures=false")
    assert short == {"sweep_dir": "my sweeps/a", "out": "o,1", "figures": False}  # quoted for Hydra's grammar
    assert short == _printed_config(capsys, "sweep_dir='my sweeps/a'", "out='o,1'", "figures=false")


def test_a_wrong_key_or_type_is_one_line_exit_2_naming_a_close_key(tmp_path, capsys):
    assert main([str(tmp_path), "figuers=false"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "figuers" in err and "did you mean figures?" in err
    assert main([str(tmp_path), "figures=maybe"]) == 2
    assert "expected true or false" in capsys.readouterr().err
    assert main([]) == 2
    assert "sweep_dir has no default" in capsys.readouterr().err


def test_multirun_aggregates_each_sweep_given(sweep_dir, tmp_path, capsys, monkeypatch):
    import shutil

    monkeypatch.setenv("HEADLAB_LOG_DIR", str(tmp_path / "logs"))
    other = shutil.copytree(sweep_dir, tmp_path / "other")
    assert main(["-m", f"sweep_dir={sweep_dir},{other}", "figures=false"]) == 0
    out = capsys.readouterr().out
    for folder in (sweep_dir, other):
        assert (folder / "aggregate" / "sweep_summary.csv").is_file()
        assert f"wrote {folder / 'aggregate' / 'sweep_summary.csv'}" in out
    assert out.count("5 of 10 runs aggregated") == 2
