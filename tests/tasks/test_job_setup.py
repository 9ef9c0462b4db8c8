"""Per-job setup: torch threads from `threads` and the launcher, and `sweep=` needs `-m`."""

from __future__ import annotations

import pytest
import torch

from headlab.tasks.threads import auto_threads, available_cores, resolve_threads
from headlab.tasks.threads import set_torch_threads
from headlab.errors import ConfigError
from tests._runs import train_in_process


@pytest.mark.parametrize(
    ("launcher", "cores", "expected"),
    [
        ({"n_jobs": 2}, 2, 1),          # joblib, this machine: one thread per job
        ({"n_jobs": 2}, 16, 8),
        ({"n_jobs": 3}, 16, 5),         # floor: never more threads than cores in total
        ({"n_jobs": -1}, 16, 1),        # joblib's -1: as many jobs as cores
        ({"n_jobs": -2}, 16, 1),        # all cores but one run jobs: 16 // 15
        ({"n_jobs": 32}, 16, 1),        # more jobs than cores: still at least one thread
        ({"cpus_per_task": 4, "n_jobs": None}, 64, 4),  # submitit: the task's cpus
        ({"cpus_per_task": None}, 8, None),            # submitit without cpus_per_task: torch's default
        (None, 8, None),                # basic launcher: one job at a time, torch's default
    ],
)
def test_auto_threads_divides_the_cores_among_parallel_jobs(launcher, cores, expected):
    assert auto_threads(launcher, cores) == expected


@pytest.mark.parametrize("bad", [0, -1, "four", 1.5, True])
def test_bad_threads_value_names_the_key(bad):
    with pytest.raises(ConfigError, match="invalid config threads="):
        resolve_threads(bad, None, cores=2)


def test_null_threads_leaves_torch_alone_and_an_int_sets_it():
    before = torch.get_num_threads()
    try:
        assert set_torch_threads(None) == before
        assert set_torch_threads(1) == 1 == torch.get_num_threads()
        assert set_torch_threads("auto", {"n_jobs": available_cores()}) == 1
    finally:
        torch.set_num_threads(before)


def test_a_sweep_without_multirun_is_a_one_line_error(tmp_path, monkeypatch, capfd):
    result = train_in_process(tmp_path, monkeypatch, capfd, "sweep=smoke")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "invalid config sweep='smoke'" in result.stderr and "headlab-train -m sweep=smoke" in result.stderr
    assert "Traceback" not in result.stderr
    runs = list((tmp_path / "logs" / "runs").glob("*/summary.json"))
    assert all('"completed"' not in p.read_text() for p in runs)


def test_an_unknown_sweep_lists_the_shipped_ones(tmp_path, monkeypatch, capfd):
    result = train_in_process(tmp_path, monkeypatch, capfd, "-m", "sweep=hedas")
    assert result.returncode == 2
    assert "sweep='hedas'" in result.stderr and "heads_fixed_dhead" in result.stderr and "smoke" in result.stderr
    assert not (tmp_path / "logs" / "sweeps").exists()
