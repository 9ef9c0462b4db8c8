"""A run dir has one writer and one identity: a second writer is refused naming the holder, a fresh
start never silently replaces a run, and a moved run dir resumes under the id of its first start."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from headlab.tasks.lock import RunLock
from headlab.store import RunDir, read_table
from tests._runs import TINY
from tests._runs import run_cli, summary

QUIET = ["trainer.enable_progress_bar=false", "trainer.enable_model_summary=false", "callbacks.progress_bar=null",
         "callbacks.head_metrics.figures=false"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("finished")
    result = run_cli(tmp, *TINY, *QUIET, f"hydra.run.dir={tmp / 'run'}")
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp / "run"


def _copy(finished: Path, to: Path) -> Path:
    shutil.copytree(finished, to)
    return to


def _digest(run: Path) -> dict[str, str]:
    """Every file of the run with its content hash (the lock file aside: it records the last holder)."""
    return {str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(run.rglob("*"))
            if p.is_file() and p.name != ".lock"}


@pytest.mark.slow  # a real training subprocess (~20 s each on a shared CPU)
def test_second_writer_is_refused_naming_the_holder(tmp_path, finished):
    run = _copy(finished, tmp_path / "run")
    before = _digest(run)
    with RunLock(RunDir(run)):  # this test process is the writer
        result = run_cli(tmp_path, *TINY, *QUIET, "resume=true", "trainer.max_epochs=2", f"hydra.run.dir={run}")
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pid {os.getpid()}" in lines[0], result.stderr
    assert _digest(run) == before  # on the parent commit: both write, tables get duplicated rows


def test_a_refused_second_training_writes_nothing_into_the_held_folder(tmp_path, capsys, monkeypatch):
    """The lock is taken at Hydra's run start (LockRunDir), before Hydra writes .hydra/: the folder of a
    running job stays as it was (before: .hydra/config.yaml and overrides.yaml rewritten, then restored)."""
    import subprocess
    import sys

    from hydra.core.global_hydra import GlobalHydra

    from headlab.cli.train import main

    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from headlab.tasks.lock import RunLock; "
                               f"from headlab.store import RunDir; RunLock(RunDir({str(run)!r})).__enter__(); "
                               "print('held', flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(sys, "argv", ["headlab-train", *TINY, "seed=7", f"hydra.run.dir={run}",
                                          f"paths.log_dir={tmp_path}"])
        try:
            with pytest.raises(SystemExit) as exited:
                main()
        finally:
            GlobalHydra.instance().clear()
        assert exited.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"pid {holder.pid}" in err[0], err
        assert sorted(p.name for p in run.iterdir()) == [".lock"]  # no .hydra/, no log, no summary
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow  # two real trainings side by side
def test_a_second_training_one_second_later_changes_no_byte_of_the_first(tmp_path):
    """Issue 34 (lock before Hydra writes): the first run's record says what it trained with."""
    import subprocess

    from tests._runs import cli_command, cli_env

    run = tmp_path / "run"
    longer = [*TINY, *QUIET, "trainer.limit_train_batches=1.0", "trainer.max_epochs=12",
              f"hydra.run.dir={run}"]  # long enough to still run when the second starts
    first = subprocess.Popen(cli_command(*longer), env=cli_env(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    import time

    while not (run / ".lock").exists() and first.poll() is None:
        time.sleep(0.2)
    time.sleep(1)
    second = run_cli(tmp_path, *longer, "seed=7", "data.synthetic.n=3000")
    out, err = first.communicate(timeout=900)
    assert first.returncode == 0, err[-3000:]
    assert second.returncode == 2 and "in use by another headlab process" in second.stderr, second.stderr[-2000:]
    import yaml

    for saved in (run / ".hydra" / "config.yaml", run / "segments" / "0" / "config.yaml"):
        config = yaml.safe_load(saved.read_text())
        assert config["seed"] == 42 and config["data"]["synthetic"]["n"] == 800, saved
    assert "seed=7" not in (run / ".hydra" / "overrides.yaml").read_text()


def test_lock_is_released_by_a_dead_process(tmp_path):
    """flock dies with its holder: a SIGKILLed run leaves no stale lock (resume works at once)."""
    import subprocess
    import sys

    run = tmp_path / "run"
    code = f"from headlab.tasks.lock import RunLock; from headlab.store import RunDir; l = RunLock(RunDir({str(run)!r})).__enter__(); import os; os.kill(os.getpid(), 9)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == -9
    with RunLock(RunDir(run)):
        pass


@pytest.mark.slow  # a real training subprocess (~20 s each on a shared CPU)
def test_fresh_start_over_a_finished_run_is_refused(tmp_path, finished):
    run = _copy(finished, tmp_path / "run")
    before = _digest(run)
    result = run_cli(tmp_path, *TINY, *QUIET, "seed=7", f"hydra.run.dir={run}")
    assert result.returncode == 2, result.stderr[-3000:]  # on the parent commit: exit 0, the run replaced
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "overwrite=true" in lines[0] and "status completed" in lines[0], result.stderr
    assert _digest(run) == before  # .hydra/ put back too


@pytest.mark.slow  # a real training subprocess (~20 s each on a shared CPU)
def test_overwrite_replaces_the_run_cleanly(tmp_path, finished):
    run = _copy(finished, tmp_path / "run")
    result = run_cli(tmp_path, *TINY, *QUIET, "seed=7", "overwrite=true", f"hydra.run.dir={run}")
    assert result.returncode == 0, result.stderr[-3000:]
    facts = summary(run)
    assert facts["status"] == "completed" and "resumed_from" not in facts
    assert len(list((run / "segments").iterdir())) == 1  # nothing of the old run mixed in


@pytest.mark.slow  # a real training subprocess (~20 s each on a shared CPU)
def test_moved_run_dir_resumes_under_its_first_id(tmp_path, finished):
    original = summary(finished)["run_id"]
    moved = _copy(finished, tmp_path / "renamed-run")
    result = run_cli(tmp_path, *TINY, *QUIET, "resume=true", "trainer.max_epochs=2", f"hydra.run.dir={moved}")
    assert result.returncode == 0, result.stderr[-3000:]  # on the parent commit: "holds 2 runs", status failed
    facts = summary(moved)
    assert facts["status"] == "completed" and facts["run_id"] == original == finished.name
    table = read_table(moved / "head_metrics.parquet")
    assert set(table["run_id"]) == {original}
    assert facts["n_measurements"] == table["step"].nunique() > facts["n_measurements_this_start"]  # every start counted
