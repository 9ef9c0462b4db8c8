"""Torch threads per job, set from the job's own `threads`: an explicit count, torch's default (null), or
`auto` = the cores a job gets from the launcher in use. Jobs of a sweep run side by side (joblib workers,
submitit tasks), and joblib reuses a worker process for several jobs, so every job sets its own count
and never keeps what an earlier job in the same process left behind."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from headlab.config.values import check_threads

log = logging.getLogger("headlab.job")


def set_torch_threads(threads: int | str | None, launcher: Mapping[str, Any] | None = None) -> int:
    """`threads`: None = leave torch as it is; an int >= 1; "auto" = `auto_threads(launcher)`.

    Returns the thread count torch uses afterwards.
    """
    import torch

    wanted = resolve_threads(threads, launcher, available_cores())
    if wanted is not None and wanted != torch.get_num_threads():
        torch.set_num_threads(wanted)
    log.info("torch threads: %d (threads=%s)", torch.get_num_threads(), threads)
    return torch.get_num_threads()


def resolve_threads(threads: int | str | None, launcher: Mapping[str, Any] | None, cores: int) -> int | None:
    """The thread count asked for, or None for torch's default.

    >>> resolve_threads("auto", {"n_jobs": 2}, cores=16), resolve_threads("auto", {"n_jobs": -1}, cores=16)
    (8, 1)
    >>> resolve_threads("auto", {"cpus_per_task": 4}, cores=64), resolve_threads("auto", None, cores=8)
    (4, None)
    >>> resolve_threads(3, None, cores=2)
    3
    """
    if threads is None:
        return None
    if threads == "auto":
        return auto_threads(launcher, cores)
    check_threads(threads)
    return threads


def auto_threads(launcher: Mapping[str, Any] | None, cores: int) -> int | None:
    """Cores per job for the launcher in use: joblib runs `n_jobs` jobs at once (negative n_jobs
    count back from all cores, as joblib does), submitit gives each task `cpus_per_task`; the basic
    launcher runs one job at a time (None: torch's default, all cores)."""
    launcher = launcher or {}
    n_jobs = launcher.get("n_jobs")
    if isinstance(n_jobs, int) and n_jobs != 0:
        parallel = n_jobs if n_jobs > 0 else max(1, cores + 1 + n_jobs)
        return max(1, cores // parallel)
    cpus = launcher.get("cpus_per_task")
    if isinstance(cpus, int) and cpus >= 1:
        return cpus
    return None


def available_cores() -> int:
    """Cores this process may run on (the affinity mask, which SLURM and taskset restrict)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
