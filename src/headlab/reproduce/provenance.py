"""Which sweep may serve as a claim's evidence: one whose jobs' saved configs match the spec's grid.

A sweep folder name is not an identity: a user's own `make sweep SWEEP=heads` with 2 epochs lands
in the same `heads-zh_reviews/` as the spec's grid. Each job's recorded configuration (its
`.hydra/` files, read through RunDir) is compared with the spec's overrides at the scale
(`key=v1,v2` a swept axis, `key=v` a fixed setting, `sweep=` the grid file): a job holding a value
outside them, or a fixed setting it does not hold, makes the sweep another experiment, refused as
evidence with the reason. A sweep with no saved job configs cannot be checked and is refused too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headlab.reproduce.statistics import same_value
from headlab.store import RunDir
from headlab.store.run_dir import CONFIG_FILE, HYDRA_DIR


@dataclass(frozen=True)
class Check:
    """The outcome for one sweep folder: `problems` empty when it matches; `commit` as its jobs recorded it."""

    folder: Path
    jobs: int
    problems: tuple[str, ...]
    commit: str

    @property
    def ok(self) -> bool:
        return not self.problems


def expected_grid(sweep: str | None, overrides: tuple[str, ...]) -> dict[str, list[str]]:
    """key -> allowed values from the spec's overrides at one scale (a comma list is a swept axis).

    >>> expected_grid("heads", ("experiment=sweep_zh", "seed=0,1,2", "data.max_len=64"))
    {'sweep': ['heads'], 'experiment': ['sweep_zh'], 'seed': ['0', '1', '2'], 'data.max_len': ['64']}
    """
    grid: dict[str, list[str]] = {"sweep": [sweep]} if sweep else {}
    for item in overrides:
        key, _, value = item.partition("=")
        key = key.lstrip("+~")
        if not key or key.startswith("hydra"):
            continue
        value = value.strip()
        grid[key] = [value] if value.startswith(("[", "{", "'", '"')) else [v.strip() for v in value.split(",")]
    return grid


def recorded_value(job_dir: Path, key: str) -> Any:
    """The job's value of `key` from its saved config (a config group: the choice Hydra recorded)."""
    from omegaconf import OmegaConf

    job = RunDir(job_dir)
    if job.hydra_file_path.is_file():
        choices = OmegaConf.load(job.hydra_file_path).hydra.runtime.choices
        if key in choices:
            return choices[key]
    return OmegaConf.select(OmegaConf.load(job.hydra_config_path), key, default=None)


def check_sweep(folder: Path, grid: dict[str, list[str]]) -> Check:
    """Compare every job of the sweep `folder` (a dir with `.hydra/config.yaml`) with `grid`."""
    jobs = sorted(p.parent.parent for p in folder.glob(f"*/{HYDRA_DIR}/{CONFIG_FILE}"))
    if not jobs:
        return Check(folder, 0, (f"no job with a saved config ({HYDRA_DIR}/{CONFIG_FILE}) to check the grid against",), "")
    problems: list[str] = []
    for key, allowed in grid.items():
        seen = [recorded_value(job, key) for job in jobs]
        outside = sorted({str(v) for v in seen if not any(same_value(v, a) for a in allowed)})
        if outside:
            problems.append(f"{key} is {', '.join(outside)} in its jobs, the spec asks {','.join(allowed)}")
    commits = sorted({str(RunDir(j).summary.get("git_commit") or RunDir(j).summary.get("commit") or "") for j in jobs} - {""})
    return Check(folder, len(jobs), tuple(problems), ", ".join(commits) or "not recorded by its jobs")


def unmet_settings(folder: Path, settings: tuple[tuple[str, Any], ...]) -> list[str]:
    """The prerequisite settings (key, value) some job of the sweep `folder` does not hold, as text."""
    jobs = sorted(p.parent.parent for p in folder.glob(f"*/{HYDRA_DIR}/{CONFIG_FILE}"))
    unmet = []
    for key, wanted in settings:
        seen = sorted({str(recorded_value(job, key)) for job in jobs if not same_value(recorded_value(job, key), wanted)})
        if seen or not jobs:
            unmet.append(f"{key}={wanted} (the jobs have {', '.join(seen) or 'no saved config'})")
    return unmet
