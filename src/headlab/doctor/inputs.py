"""Read what the doctor's checks need from a run directory; find the jobs of a sweep directory.

A missing or unreadable table is None, never an exception: the check that needs it then says
"not measured" and why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from headlab.doctor.checks import RunTables
from headlab.errors import DataError
from headlab.store import RunDir


def load_run_tables(run: RunDir) -> RunTables:
    """summary.json (required), the saved config, the two head tables and importance.json. A file
    that is missing is None (its checks say "not measured"); one that is present but cannot be read
    (a corrupt parquet part, a broken config) is listed in `unreadable` too: the doctor fails it."""
    unreadable: list[str] = []
    nonfinite: list[str] = []
    tables = RunTables(summary=run.require_summary(), config=_config(run, unreadable),
                       head_metrics=_table(run.head_metrics_path, unreadable, nonfinite),
                       head_pairs=_table(run.head_pairs_path, unreadable, nonfinite), importance=_json(run.importance_report_path))
    tables.unreadable, tables.nonfinite = unreadable, nonfinite
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


def _table(path: Path, unreadable: list[str], nonfinite: list[str]) -> pd.DataFrame | None:
    """A table (a dataset folder of parts, or one parquet file) without its NaN / inf rows; each part that
    cannot be read is named in `unreadable`, each that holds non-finite values in `nonfinite`."""
    if not path.exists():
        return None
    parts = sorted(path.glob("part-*.parquet")) if path.is_dir() else [path]
    bad, frames = [], []
    for part in parts:
        name = f"{path.name}/{part.name}" if part != path else path.name
        try:
            frame = pd.read_parquet(part)
        except Exception as err:  # noqa: BLE001 - untrusted files: any failure is "cannot be read"
            bad.append(f"{name}: {_why(err)}")
            continue
        frames.append(_finite_rows(frame, name, nonfinite))
    unreadable.extend(bad)
    if bad or not parts:
        return None
    table = pd.concat(frames, ignore_index=True)
    keys = [c for c in ("step", "layer", "head", "head_a", "head_b", "metric") if c in table.columns]
    return table.sort_values(keys, kind="stable").reset_index(drop=True)


def _finite_rows(frame: pd.DataFrame, name: str, nonfinite: list[str]) -> pd.DataFrame:
    """`frame` without the rows whose value is NaN or infinite; a part that had some is named with the count per metric."""
    if "value" not in frame.columns:
        return frame
    values = pd.to_numeric(frame["value"], errors="coerce")
    finite = np.isfinite(values.to_numpy(dtype=np.float64))
    if finite.all():
        return frame
    dropped = frame.loc[~finite & ~_undefined(frame, values)]
    if dropped.empty:
        return frame.loc[finite].reset_index(drop=True)
    per_metric = dropped["metric"].value_counts().sort_index() if "metric" in dropped.columns else pd.Series(dtype=int)
    detail = ", ".join(f"{m} {n}" for m, n in per_metric.items())
    nonfinite.append(f"{name}: {len(dropped)} of {len(frame)} values ({detail})" if detail else
                     f"{name}: {len(dropped)} of {len(frame)} values")
    return frame.loc[finite].reset_index(drop=True)


def _undefined(frame: pd.DataFrame, values: pd.Series) -> np.ndarray:
    """Rows of a metric read from chosen queries (`{metric}@task`, `@token`) that is NaN for every head of
    its layer: no such query has that relation (from [CLS] there is no previous token; a token the probe
    lacks), so NaN is the value's definition, not a diverged step. All-query metrics are never excused."""
    if "metric" not in frame.columns:
        return np.zeros(len(frame), dtype=bool)
    conditional = frame["metric"].astype(str).str.contains("@", regex=False)
    keys = [frame["metric"]] + ([frame["layer"]] if "layer" in frame.columns else [])
    all_nan = values.isna().groupby(keys).transform("all")
    return (conditional & all_nan).to_numpy(dtype=bool)


def _why(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:120]}" if text else type(err).__name__


def _json(path: Path) -> dict[str, Any] | None:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None
