"""Checks on the long tables before plotting, so a wrong table fails with a clear message."""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from headlab.errors import ConfigError, DataError


def checked_table(df: pd.DataFrame, source: str, columns: Sequence[str], keys: Sequence[str]) -> pd.DataFrame:
    """Validate one run's long table: required `columns`, one run_id, unique `keys` rows.

    Mixing runs (or measuring a point twice) would silently draw two series as one line.
    """
    if not isinstance(df, pd.DataFrame):
        raise DataError(source, f"expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(source, f"missing columns {missing}; has {list(df.columns)}")
    if "run_id" in df.columns and df["run_id"].nunique() > 1:
        runs = sorted(map(str, df["run_id"].unique()))
        raise DataError(source, f"holds {len(runs)} runs {runs[:5]}; plot one run at a time")
    dup = df.duplicated(list(keys), keep=False)
    if dup.any():
        first = df.loc[dup, list(keys)].iloc[0].to_dict()
        raise DataError(source, f"{int(dup.sum())} rows share the same {list(keys)}, e.g. {first}")
    return df


def checked_metrics(metrics: Sequence[str], key: str = "metrics") -> list[str]:
    """`metrics` as a list of names; a bare string would otherwise iterate by character."""
    names = [] if isinstance(metrics, str) else list(metrics)
    if not names or not all(isinstance(m, str) for m in names):
        raise ConfigError(key, metrics, "a non-empty sequence of metric names")
    return names
