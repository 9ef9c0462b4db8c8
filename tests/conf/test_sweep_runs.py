"""Sweeps for real, as a user runs them: one run dir and one offline W&B run per job, through the
basic, joblib and submitit_local launchers, and the smoke sweep aggregated end to end."""

from __future__ import annotations

import itertools
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from headlab.tasks.threads import available_cores

# Seconds-per-job overrides (same spirit as tests/_runs.py's TINY).
TINY = ["debug=fast", "data=synthetic", "data.synthetic.n=400", "data.probe_size=16", "data.batch_size=32",
        "model.d_model=16", "model.n_layers=1", "callbacks.head_metrics.figures=false", "trainer.enable_model_summary=false"]


def _user_env(tmp_path: Path) -> dict[str, str]:
    """A user's environment: no W&B / matplotlib dirs preset (the suite's conftest sets them) and
    a fresh HOME, so the tests see where a sweep really writes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_") and k != "MPLCONFIGDIR"}
    (tmp_path / "home").mkdir(exist_ok=True)
    return {**env, "HOME": str(tmp_path / "home"), "HEADLAB_LOG_DIR": str(tmp_path / "logs"), "WANDB_SILENT": "true"}


def _multirun(tmp_path: Path, sweep_dir: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "headlab.cli.train", "-m", *args, f"hydra.sweep.dir={sweep_dir}"],
                            capture_output=True, text=True, env=_user_env(tmp_path), timeout=timeout, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def _job_dirs(sweep_dir: Path) -> list[Path]:
    return sorted((p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))


def _summaries(sweep_dir: Path) -> list[dict]:
    return [json.loads((job / "summary.json").read_text()) for job in _job_dirs(sweep_dir)]


def _wandb_runs(job_dir: Path) -> list:
    """The offline W&B runs written inside one job's run dir."""
    return [_WandbRun(f) for f in sorted(job_dir.glob("wandb/offline-run-*/run-*.wandb"))]


def _wandb_sweep(tmp_path_factory, name: str, *grid: str) -> tuple[Path, Path]:
    """`headlab-train -m logger=wandb sweep_name=NAME GRID`: every job in one process (basic launcher)."""
    tmp_path = tmp_path_factory.mktemp(name)
    sweep_dir = tmp_path / "sweep"
    _multirun(tmp_path, sweep_dir, *TINY, "logger=wandb", f"sweep_name={name}", *grid)
    return tmp_path, sweep_dir


@pytest.fixture(scope="module")
def four_job_wandb_sweep(tmp_path_factory):
    return _wandb_sweep(tmp_path_factory, "wb4", "model.n_heads=2,4", "seed=0,1")


@pytest.fixture(scope="module")
def two_seed_wandb_sweep(tmp_path_factory):
    """The default suite's W&B sweep: two seeds of one condition."""
    return _wandb_sweep(tmp_path_factory, "wb2", "model.n_heads=2", "seed=0,1")


def test_two_seeds_are_two_offline_wandb_runs_of_one_condition(two_seed_wandb_sweep):
    _, sweep_dir = two_seed_wandb_sweep
    jobs = _job_dirs(sweep_dir)
    runs = [_wandb_runs(job) for job in jobs]
    assert [len(r) for r in runs] == [1, 1], "each job must be exactly one W&B run, inside its run dir"
    runs = [r[0] for r in runs]
    assert len({r.run_id for r in runs}) == 2 and {r.run_group for r in runs} == {"wb2"}
    assert runs[0].job_type == runs[1].job_type and "seed=" not in runs[0].job_type  # W&B averages over the seeds
    assert [r.config["seed"] for r in runs] == [s["swept"]["seed"] for s in _summaries(sweep_dir)] == [0, 1]


@pytest.mark.slow
def test_four_jobs_are_four_offline_wandb_runs_grouped_by_sweep(four_job_wandb_sweep):
    _, sweep_dir = four_job_wandb_sweep
    jobs = _job_dirs(sweep_dir)
    assert [j.name for j in jobs] == ["0", "1", "2", "3"]
    runs = [_wandb_runs(job) for job in jobs]
    assert [len(r) for r in runs] == [1, 1, 1, 1], "each job must be exactly one W&B run, inside its run dir"
    runs = [r[0] for r in runs]
    assert len({r.run_id for r in runs}) == 4
    assert {r.run_group for r in runs} == {"wb4"}
    for run, summary in zip(runs, _summaries(sweep_dir)):
        assert summary["status"] == "completed"
        n_heads, seed = summary["swept"]["model.n_heads"], summary["swept"]["seed"]
        assert "seed=" not in run.job_type and f"model.n_heads={n_heads}" in run.job_type
        config = run.config
        assert config["seed"] == seed and config["model"]["n_heads"] == n_heads
        assert {"init_scale", "d_head"} <= set(config["model"]) and "lr" in config["optim"]
        assert config["sweep_name"] == "wb4"
    # the two seeds of a config share a job_type, so W&B can average over them
    by_type: dict[str, set[str]] = {}
    for run in runs:
        by_type.setdefault(run.job_type, set()).add(run.run_id)
    assert sorted(len(ids) for ids in by_type.values()) == [2, 2]


def test_a_multirun_writes_nothing_to_the_home_directory(two_seed_wandb_sweep):
    """DESIGN: W&B and matplotlib caches go under the log folder, never $HOME."""
    tmp_path, _ = two_seed_wandb_sweep
    written = [str(p.relative_to(tmp_path / "home")) for p in (tmp_path / "home").rglob("*")]
    assert written == [], f"written to $HOME: {written[:10]}"


@pytest.mark.slow
def test_submitit_local_runs_each_job_as_its_own_process(tmp_path):
    sweep_dir = tmp_path / "sweep"
    result = _multirun(tmp_path, sweep_dir, *TINY, "hydra/launcher=submitit_local", "hydra.launcher.cpus_per_task=1",
                       "hydra.launcher.timeout_min=15", "threads=auto", "model.n_heads=2,4", "seed=0")
    summaries = _summaries(sweep_dir)
    assert [s["status"] for s in summaries] == ["completed", "completed"]
    assert sorted(s["swept"]["model.n_heads"] for s in summaries) == [2, 4]
    submitit_logs = list((sweep_dir / ".submitit").glob("*/*_log.out"))
    assert len(submitit_logs) == 2, result.stderr[-2000:]
    for job in _job_dirs(sweep_dir):  # threads=auto follows cpus_per_task
        assert "torch threads: 1 (threads=auto)" in (job / "train.log").read_text()


@pytest.fixture(scope="module")
def smoke_sweep(tmp_path_factory):
    """`headlab-train -m sweep=smoke hydra/launcher=joblib` with every logger: 8 tiny jobs."""
    tmp_path = tmp_path_factory.mktemp("smoke")
    sweep_dir = tmp_path / "sweep"
    _multirun(tmp_path, sweep_dir, "sweep=smoke", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "logger=many")
    return tmp_path, sweep_dir


@pytest.mark.slow
def test_smoke_sweep_through_joblib_one_completed_run_dir_per_job(smoke_sweep):
    _, sweep_dir = smoke_sweep
    summaries = _summaries(sweep_dir)
    assert [j.name for j in _job_dirs(sweep_dir)] == [str(i) for i in range(8)]
    assert [s["status"] for s in summaries] == ["completed"] * 8
    grid = {(s["swept"]["model.n_heads"], s["swept"]["model.init_scale"], s["swept"]["seed"]) for s in summaries}
    assert grid == set(itertools.product([2, 4], [0.5, 1.0], [0, 1]))
    assert len({s["run_id"] for s in summaries}) == 8
    for job in _job_dirs(sweep_dir):
        assert (job / "head_metrics.parquet").is_dir() and (job / "metrics.csv").is_file()


@pytest.mark.slow
def test_smoke_sweep_jobs_are_distinct_wandb_runs_with_threads_per_job(smoke_sweep):
    _, sweep_dir = smoke_sweep
    runs = [run for job in _job_dirs(sweep_dir) for run in _wandb_runs(job)]
    assert len(runs) == 8 and len({r.run_id for r in runs}) == 8
    assert {r.run_group for r in runs} == {"smoke"}
    assert len({r.job_type for r in runs}) == 4  # 2 head counts x 2 gains; seeds share it
    expected = max(1, available_cores() // 2)  # n_jobs=2 jobs side by side
    for job in _job_dirs(sweep_dir):
        assert f"torch threads: {expected} (threads=auto)" in (job / "train.log").read_text()


@pytest.mark.slow
def test_smoke_sweep_aggregates_to_a_complete_table(smoke_sweep):
    tmp_path, sweep_dir = smoke_sweep
    import pandas as pd

    result = subprocess.run([sys.executable, "-m", "headlab.cli.aggregate", str(sweep_dir)], capture_output=True,
                            text=True, env=_user_env(tmp_path), timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"\b8 of 8 runs aggregated", result.stdout), result.stdout[-2000:]
    table = pd.read_parquet(next(sweep_dir.rglob("sweep.parquet")))
    assert set(table["run_id"]) == {s["run_id"] for s in _summaries(sweep_dir)}
    assert table.groupby("run_id")["step"].nunique().min() >= 3  # a trajectory per run, not one point


# An offline W&B run file (`run-<id>.wandb`) read without network or account. It is a LevelDB-style
# log: a 7-byte header (":W&B", magic, version), then 32 KiB blocks of chunks
# `crc32 (4) | length (2, little endian) | type (1) | payload`; type 1 is a whole record, 2 / 3 / 4
# start, continue and end one split across blocks. Records are `wandb_internal_pb2.Record`
# protobufs; wandb 0.31 ships the protobuf but no reader for the log.
_BLOCK, _HEADER, _CHUNK = 32 * 1024, 7, 7


def _wandb_records(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path}: not a W&B run file"
    out, pending, pos = [], b"", _HEADER
    while pos + _CHUNK <= len(data):
        if _BLOCK - pos % _BLOCK < _CHUNK:  # a block's tail too short for a chunk is padding
            pos += _BLOCK - pos % _BLOCK
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + _CHUNK])
        payload = data[pos + _CHUNK:pos + _CHUNK + length]
        pos += _CHUNK + length
        if kind == 0:  # zero fill: the end of what was written
            break
        pending = payload if kind in (1, 2) else pending + payload
        if kind in (1, 4):
            out.append(pending)
            pending = b""
    return out


class _WandbRun:
    """An offline run file's `RunRecord` fields plus its config as logged (later updates win)."""

    def __init__(self, path: Path) -> None:
        from wandb.proto import wandb_internal_pb2 as pb

        self.config: dict = {}
        run = None
        for raw in _wandb_records(path):
            record = pb.Record()
            record.ParseFromString(raw)
            kind = record.WhichOneof("record_type")
            if kind == "run":
                run = record.run
            if kind in ("run", "config"):
                updates = record.run.config.update if kind == "run" else record.config.update
                self.config.update({item.key: json.loads(item.value_json) for item in updates})
        assert run is not None, f"{path}: no run record"
        self.run_id, self.run_group, self.job_type = run.run_id, run.run_group, run.job_type
