"""Environment faults during training are one line and leave a consistent run (issue 34.2): a disk that
fills up or a file-size limit during a checkpoint write stops the run with a StorageError naming the file
and the cause, summary.json says `failed` with that reason, and nothing half-written is left behind."""

from __future__ import annotations

import errno
import json
import resource
import sys

import pytest

from headlab.store.faults import StorageError
from headlab.tasks.train import train
from tests._runs import TINY, cli_env

QUIET = ("callbacks.head_metrics.figures=false", "test=false", "threads=1")


def _no_temporary_files(run):
    return [p for p in run.rglob("*") if ".tmp" in p.name]


def test_a_full_disk_during_a_checkpoint_write_fails_the_run_in_one_line(tmp_path, tiny_config, monkeypatch, one_thread):
    import headlab.lit.checkpointing as checkpointing

    def full_disk(obj, path, *args, **kwargs):
        with open(path, "wb") as fh:
            fh.write(b"PK\x03\x04 half a checkpoint")  # what a write stopped by ENOSPC leaves
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpointing.torch, "save", full_disk)
    run = tmp_path / "run"
    with pytest.raises(StorageError) as info:
        train(tiny_config(run, *QUIET))
    message = str(info.value)
    assert "\n" not in message and message.endswith(": cannot be written: no space left on device (the disk is full)")
    assert message.startswith(str(run / "checkpoints" / "best-"))  # the first checkpoint of the run: the best so far
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["error"] == message and summary["last_checkpoint"] is None
    assert list((run / "checkpoints").glob("*.ckpt")) == [] and _no_temporary_files(run) == []


@pytest.mark.slow
def test_a_file_size_limit_during_training_fails_the_run_in_one_line(tmp_path):
    """A real RLIMIT_FSIZE in a subprocess: torch's writer fails with `inline_container.cc`; the checkpoint
    (about 430 kB) is over the limit, every other file of the run is under it."""
    import subprocess

    run, limit = tmp_path / "run", 300_000
    code = (f"import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit})); "
            "from headlab.cli.train import main; main()")
    overrides = [*TINY, *QUIET, f"hydra.run.dir={run}"]
    result = subprocess.run([sys.executable, "-c", code, *overrides], capture_output=True, text=True,
                            env=cli_env(tmp_path), cwd=tmp_path, timeout=600)
    assert result.returncode == 2, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"headlab-train: error: {run / 'checkpoints'}/")
    assert last.endswith(f".ckpt: cannot be written: file too large (the file-size limit, ulimit -f, is {limit} bytes)")
    assert "Traceback" not in result.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed" and "file-size limit" in summary["error"]
    assert list((run / "checkpoints").glob("*.ckpt")) == [] and _no_temporary_files(run) == []
    assert resource.getrlimit(resource.RLIMIT_FSIZE)[0] == resource.RLIM_INFINITY  # this process was never limited
