"""SIGTERM / SIGINT to a sweep's main process reach every job (issue 34.3): the jobs save, record
`interrupted` and print their resume lines; the main process waits for them, exits 143 and leaves no
worker behind. Unit tests use stand-in child processes; the slow test runs a real 2-job joblib sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from headlab.sweep.signals import SweepSignals, held_run_locks, job_processes, wait_for_jobs
from tests._runs import cli_command, cli_env

# A stand-in job: holds <dir>/.lock locked as a training does; on SIGTERM writes `stopped` and exits.
HOLDER = """
import fcntl, pathlib, signal, sys, time
run = pathlib.Path(sys.argv[1]); run.mkdir(parents=True, exist_ok=True)
lock = open(run / ".lock", "a+"); fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
def stop(signum, frame):
    (run / "stopped").write_text(signal.Signals(signum).name); sys.exit(0)
signal.signal(signal.SIGTERM, stop)
(run / "ready").write_text("")
time.sleep(60)
"""


def _holders(tmp_path, *names):
    processes = [subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / n)]) for n in names]
    deadline = time.monotonic() + 30
    while not all((tmp_path / n / "ready").exists() for n in names):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return processes


def test_the_jobs_and_their_run_locks_are_found_and_waited_for(tmp_path):
    processes = _holders(tmp_path, "0", "1")
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a child that runs no job
    try:
        found = job_processes(os.getpid())
        assert {p.pid for p in processes} <= set(found) and helper.pid not in found  # e.g. the W&B service: never signalled
        held = held_run_locks([p.pid for p in processes])
        assert held == {tmp_path / n / ".lock": p.pid for n, p in zip("01", processes)}
        assert wait_for_jobs(0.3) == [tmp_path / "0", tmp_path / "1"]  # still held after the wait
    finally:
        for p in (*processes, helper):
            p.kill()
            p.wait()
    assert wait_for_jobs(0.3) == []


def test_a_signal_to_the_main_process_reaches_every_job_and_exits_143_after_them(tmp_path, capsys):
    processes = _holders(tmp_path, "0", "1")
    before = signal.getsignal(signal.SIGTERM)
    try:
        with SweepSignals("headlab-train", wait_s=30), pytest.raises(SystemExit) as exited:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises before this ends
        assert exited.value.code == 143
        assert [(tmp_path / n / "stopped").read_text() for n in "01"] == ["SIGTERM", "SIGTERM"]
        assert [p.wait(timeout=10) for p in processes] == [0, 0]
        err = capsys.readouterr().err.splitlines()
        assert err[0].startswith("headlab-train: SIGTERM: passed to ") and "each saves its checkpoint" in err[0]
        assert err[-1].startswith("headlab-train: sweep stopped by SIGTERM; launch the same command with resume=auto")
        assert signal.getsignal(signal.SIGTERM) == before  # the handler is the main process's only inside the sweep
    finally:
        for p in processes:
            p.kill()
            p.wait()


def _alive(pid: int) -> bool:
    """Running (a zombie left for init to reap is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_sigterm_to_a_joblib_sweeps_main_process_stops_every_job_cleanly(tmp_path):
    sweep = tmp_path / "sweep"
    overrides = ["-m", "seed=1,2", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={sweep}",
                 "data=synthetic", "data.synthetic.n=800", "data.probe_size=32", "data.batch_size=32", "model.d_model=32",
                 "model.n_heads=2", "model.n_layers=2", "trainer.max_epochs=50", "trainer.limit_train_batches=10",
                 "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false", "callbacks.progress_bar=null",
                 "callbacks.head_metrics.figures=false", "callbacks.checkpoint.every_n_train_steps=2", "threads=1", "test=false"]
    stderr = tmp_path / "stderr.txt"
    with open(stderr, "w") as err:
        main = subprocess.Popen(cli_command(*overrides), stdout=subprocess.DEVNULL, stderr=err, env=cli_env(tmp_path), cwd=tmp_path)
        try:
            deadline = time.monotonic() + 300
            while not all((sweep / j / "checkpoints" / "last.ckpt").is_file() for j in "01"):
                assert main.poll() is None and time.monotonic() < deadline, "the sweep ended before both jobs saved"
                time.sleep(0.2)
            workers = job_processes(main.pid)
            main.send_signal(signal.SIGTERM)
            assert main.wait(timeout=300) == 143
        finally:
            if main.poll() is None:
                main.kill()
    text = stderr.read_text()
    for job in "01":
        facts = json.loads((sweep / job / "summary.json").read_text())
        assert facts["status"] == "interrupted" and facts["signal"] == "SIGTERM", text[-3000:]
        assert text.count(f"continue with: headlab-train resume=true hydra.run.dir={sweep / job} ") == 1
    assert "sweep stopped by SIGTERM" in text and "Traceback" not in text
    time.sleep(1)
    assert [pid for pid in workers if _alive(pid)] == []  # on the parent commit: both workers trained on
