"""Kill a REAL training process (SIGKILL, SIGTERM, SIGINT) after its first checkpoint, resume it
with `resume=true hydra.run.dir=<dir>`, and get exactly the run that was never interrupted:
same final metrics, same head_metrics rows (none duplicated, none missing, same values)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from headlab.store import read_table
from tests._runs import RESUMABLE, cli_command, cli_env, run_cli, summary

pytestmark = pytest.mark.slow
FINAL = ("val_acc", "val_f1", "val_loss", "test_acc", "test_f1", "test_loss", "best_step", "global_step", "final_roles")
KEYS = ["step", "layer", "head", "metric"]




def _kill_after_first_checkpoint(tmp_path: Path, run: Path, signum: int) -> subprocess.CompletedProcess:
    stderr = tmp_path / "stderr.txt"
    with open(stderr, "w") as err:
        process = subprocess.Popen(cli_command(*RESUMABLE, f"hydra.run.dir={run}"), stdout=subprocess.DEVNULL,
                                   stderr=err, env=cli_env(tmp_path), cwd=tmp_path)
        try:
            while not (run / "checkpoints" / "last.ckpt").is_file():
                assert process.poll() is None, "the run ended before its first checkpoint"
                time.sleep(0.02)
            assert process.poll() is None, "the run finished before it could be killed"
            process.send_signal(signum)
            process.wait(timeout=300)
        finally:
            if process.poll() is None:
                process.kill()
    return subprocess.CompletedProcess(process.args, process.returncode, "", stderr.read_text())


def _assert_same_as_reference(run: Path, reference: Path) -> None:
    got, want = summary(run), summary(reference)
    assert got["status"] == "completed"
    assert {k: got[k] for k in FINAL} == {k: want[k] for k in FINAL}
    resumed = read_table(run / "head_metrics.parquet").drop(columns="run_id")
    uninterrupted = read_table(reference / "head_metrics.parquet").drop(columns="run_id")
    assert not resumed.duplicated(KEYS).any()
    assert set(map(tuple, resumed[KEYS].values)) == set(map(tuple, uninterrupted[KEYS].values))
    pd.testing.assert_frame_equal(resumed, uninterrupted, check_exact=True)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=["SIGKILL", "SIGTERM", "SIGINT"])
def test_killed_run_resumes_to_the_uninterrupted_result(tmp_path, reference, signum):
    run = tmp_path / "run"
    killed = _kill_after_first_checkpoint(tmp_path, run, signum)
    facts = summary(run)
    last = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert 3 <= last["global_step"] < 20  # a checkpoint from the middle of the run
    if signum == signal.SIGKILL:
        assert killed.returncode == -signal.SIGKILL and facts["status"] == "running"  # died without a word
    else:  # graceful: checkpoint at the step where it stopped, status and exit code say why
        name = signal.Signals(signum).name
        assert killed.returncode == {"SIGTERM": 143, "SIGINT": 130}[name], killed.stderr[-3000:]
        assert facts["status"] == "interrupted" and facts["signal"] == name
        assert facts["global_step"] == last["global_step"] and facts["last_checkpoint"] == str(run / "checkpoints" / "last.ckpt")
        assert "Traceback" not in killed.stderr and "resume=true" in killed.stderr

    result = run_cli(tmp_path, *RESUMABLE, "resume=true", f"hydra.run.dir={run}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert summary(run)["resumed_from"]["step"] == last["global_step"]
    _assert_same_as_reference(run, reference)
