"""Read what the doctor's checks need from a run directory; find the jobs of a sweep directory.

A missing or unreadable table is None, never an exception: the check that needs it then says
"not measured" and why.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from headlab.doctor.checks import RunTables
from headlab.store import RunDir, read_table


def is_run_dir(path: Path) -> bool:
    return RunDir(path).has_summary


def sweep_jobs(sweep_dir: str | os.PathLike) -> list[Path]:
    """The job directories (`0/`, `1/`, ...) of a multirun folder, in job order."""
    sweep_dir = Path(sweep_dir)
    return sorted((p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))


def load_run_tables(run_dir: str | os.PathLike) -> RunTables:
    """summary.json (required), `.hydra/config.yaml`, the two head tables and importance.json."""
    run = RunDir(run_dir)
    return RunTables(summary=run.require_summary(), config=_config(run), head_metrics=_table(run.head_metrics_path),
                     head_pairs=_table(run.head_pairs_path), importance=_json(run.importance_report_path))


def _config(run: RunDir) -> dict[str, Any]:
    """The config as saved by Hydra (interpolations left as text: the checks read literal keys)."""
    try:
        loaded = yaml.safe_load(run.hydra_config_path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _table(path: Path):
    try:
        return read_table(path)
    except Exception:  # untrusted files: a missing or corrupt table makes its checks "not measured"
        return None


def _json(path: Path) -> dict[str, Any] | None:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None
