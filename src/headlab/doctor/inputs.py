"""Read what the doctor's checks need from a run directory; find the jobs of a sweep directory.

A missing or unreadable table is None, never an exception: the check that needs it then says
"not measured" and why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from headlab.doctor.checks import RunTables
from headlab.errors import DataError
from headlab.store import RunDir, read_table


def load_run_tables(run: RunDir) -> RunTables:
    """summary.json (required), the saved config, the two head tables and importance.json. A file
    that is missing is None (its checks say "not measured"); one that is present but cannot be read
    (a corrupt parquet part, a broken config) is listed in `unreadable` too: the doctor fails it."""
    unreadable: list[str] = []
    tables = RunTables(summary=run.require_summary(), config=_config(run, unreadable),
                       head_metrics=_table(run.head_metrics_path, unreadable),
                       head_pairs=_table(run.head_pairs_path, unreadable), importance=_json(run.importance_report_path))
    tables.unreadable = unreadable
    return tables


def _config(run: RunDir, unreadable: list[str]) -> dict[str, Any]:
    """The saved config (`RunDir.config`, interpolations left as text: the checks read literal keys)."""
    from omegaconf import OmegaConf

    if run.config_path is None:
        return {}  # none saved: the settings checks read the summary's swept values only
    try:
        return OmegaConf.to_container(run.config(), resolve=False)
    except DataError as err:
        unreadable.append(str(err))
        return {}


def _table(path: Path, unreadable: list[str]) -> pd.DataFrame | None:
    """A table (a dataset folder of parts, or one parquet file); each part that cannot be read is named."""
    if not path.exists():
        return None
    parts = sorted(path.glob("part-*.parquet")) if path.is_dir() else [path]
    bad = []
    for part in parts:
        try:
            pd.read_parquet(part)
        except Exception as err:  # noqa: BLE001 - untrusted files: any failure is "cannot be read"
            bad.append(f"{path.name}/{part.name}: {_why(err)}" if part != path else f"{path.name}: {_why(err)}")
    unreadable.extend(bad)
    if bad or not parts:
        return None
    return read_table(path) if path.is_dir() else pd.read_parquet(path)


def _why(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:120]}" if text else type(err).__name__


def _json(path: Path) -> dict[str, Any] | None:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None
