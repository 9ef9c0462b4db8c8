"""The sweep folder's contract, beside `RunDir`: what a Hydra multirun folder holds and how to tell one.

`headlab-train -m` writes `multirun.yaml` and one `<job_num>/` run directory per job; headlab's
tools add `aggregate/` (headlab-aggregate's tables and figures), `view.html` (headlab-view) and
`doctor.json` (headlab-doctor's list of its jobs). The file names are spelled here once, and
`is_sweep_dir` is the one rule every command uses to tell a sweep from a run.
"""

from __future__ import annotations

import os
from pathlib import Path

from headlab.store.run_dir import CONFIG_FILE, DOCTOR_REPORT, HYDRA_DIR, VIEW, RunDir

MULTIRUN_FILE = "multirun.yaml"  # Hydra's record of the sweep: its sweeper, params and overrides
AGGREGATE_DIR = "aggregate"  # headlab-aggregate's default output folder


def is_sweep_dir(path: str | os.PathLike) -> bool:
    """A Hydra multirun folder: it holds multirun.yaml and is not itself a run (no `.hydra/config.yaml`)."""
    path = Path(path)
    return (path / MULTIRUN_FILE).is_file() and not (path / HYDRA_DIR / CONFIG_FILE).is_file()


class SweepDir:
    """A view of one sweep folder: its file paths and job directories (paths are computed, never checked)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"SweepDir({str(self.path)!r})"

    @property
    def is_sweep(self) -> bool:
        return is_sweep_dir(self.path)

    @property
    def multirun_path(self) -> Path:
        return self.path / MULTIRUN_FILE

    @property
    def aggregate_dir(self) -> Path:
        return self.path / AGGREGATE_DIR

    @property
    def view_path(self) -> Path:
        return self.path / VIEW

    @property
    def doctor_report_path(self) -> Path:
        return self.path / DOCTOR_REPORT

    def job_path(self, job: int | str) -> Path:
        return self.path / str(job)

    def job_paths(self) -> list[Path]:
        """The job directories (`0/`, `1/`, ...) present, in job order."""
        if not self.path.is_dir():
            return []
        return sorted((p for p in self.path.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))

    def jobs(self) -> list[RunDir]:
        """`job_paths()` as run directories."""
        return [RunDir(p) for p in self.job_paths()]
