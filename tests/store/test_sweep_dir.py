"""The sweep folder's contract: one rule tells a sweep from a run; jobs come in job order, not name order."""

from __future__ import annotations

from headlab.store import RunDir, SweepDir, is_sweep_dir


def test_a_multirun_folder_is_a_sweep_and_a_run_dir_is_not(tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    assert is_sweep_dir(sweep) and SweepDir(sweep).is_sweep
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text("seed: 1\n")
    assert not is_sweep_dir(run)
    (run / "multirun.yaml").write_text("hydra: {}\n")  # a run dir that also holds a multirun.yaml is still a run
    assert not is_sweep_dir(run)
    assert not is_sweep_dir(tmp_path / "missing")


def test_job_paths_in_job_order_without_other_folders(tmp_path):
    for name in ("10", "2", "0", "aggregate", ".submitit"):
        (tmp_path / name).mkdir()
    (tmp_path / "3").write_text("a file, not a job")
    sweep = SweepDir(tmp_path)
    assert [p.name for p in sweep.job_paths()] == ["0", "2", "10"]
    assert [r.path for r in sweep.jobs()] == [RunDir(tmp_path / n).path for n in ("0", "2", "10")]
    assert SweepDir(tmp_path / "missing").job_paths() == []


def test_the_sweep_files_are_named_once(tmp_path):
    sweep = SweepDir(tmp_path)
    assert sweep.multirun_path == tmp_path / "multirun.yaml"
    assert sweep.aggregate_dir == tmp_path / "aggregate"
    assert sweep.view_path == RunDir(tmp_path).view_path == tmp_path / "view.html"
    assert sweep.doctor_report_path == tmp_path / "doctor.json"
    assert sweep.job_path(3) == tmp_path / "3"
