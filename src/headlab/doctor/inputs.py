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
from headlab.errors import DataError
from headlab.store import HEAD_METRICS, HEAD_PAIRS, read_table

SUMMARY = "summary.json"
IMPORTANCE = "importance.json"


def is_run_dir(path: Path) -> bool:
    return (path / SUMMARY).is_file()


def sweep_jobs(sweep_dir: str | os.PathLike) -> list[Path]:
    """The job directories (`0/`, `1/`, ...) of a multirun folder, in job order."""
    sweep_dir = Path(sweep_dir)
    return sorted((p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))


def load_run_tables(run_dir: str | os.PathLike) -> RunTables:
    """summary.json (required), `.hydra/config.yaml`, the two head tables and importance.json."""
    run_dir = Path(run_dir)
    try:
        summary = json.loads((run_dir / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DataError(run_dir / SUMMARY, f"cannot be read ({err})") from err
    return RunTables(summary=summary, config=_config(run_dir), head_metrics=_table(run_dir / HEAD_METRICS),
                     head_pairs=_table(run_dir / HEAD_PAIRS), importance=_json(run_dir / IMPORTANCE))


def _config(run_dir: Path) -> dict[str, Any]:
    """The config as saved by Hydra (interpolations left as text: the checks read literal keys)."""
    try:
        loaded = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text(encoding="utf-8"))
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
