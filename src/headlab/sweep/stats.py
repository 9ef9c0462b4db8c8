"""Sweep-table helpers: when a run converged, the text columns of the printed tables (the seed
intervals themselves are `headlab.stats`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from headlab.errors import DataError


# A run has converged at the first logged step whose val acc reaches this fraction of its best.
CONVERGED_FRACTION = 0.95


def steps_to_converge(val_curve: pd.DataFrame | None, fraction: float = CONVERGED_FRACTION) -> float:
    """First logged step whose `val_acc` reaches `fraction` of the run's best logged val acc.

    The best (not the last) value is the reference because `summary.json`'s val_acc is that
    of the best checkpoint. NaN when the run logged no validation accuracy. With validation
    once per epoch the answer is an epoch boundary: its resolution is the validation cadence.

    >>> steps_to_converge(pd.DataFrame({"step": [99, 199, 299], "val_acc": [0.6, 0.78, 0.8]}))
    199.0
    """
    if val_curve is None or len(val_curve) == 0:
        return math.nan
    if not {"step", "val_acc"} <= set(val_curve.columns):
        raise DataError("val_curve", f"expected columns ['step', 'val_acc'], got {list(val_curve.columns)}")
    curve = val_curve.dropna(subset=["val_acc"]).sort_values("step", kind="stable")
    if curve.empty:
        return math.nan
    reached = curve[curve["val_acc"] >= fraction * curve["val_acc"].max()]
    return float(reached["step"].iloc[0])


def format_interval(row: pd.Series, name: str, digits: int = 3) -> str:
    """`mean [low, high]` from a table row's `<name>_mean / _ci95_low / _ci95_high` columns, for the
    terminal tables: the mean alone when the interval is undefined (one seed), `-` when there is no mean."""
    mean, low, high = (row.get(f"{name}_{part}", np.nan) for part in ("mean", "ci95_low", "ci95_high"))
    if pd.isna(mean):
        return "-"
    if pd.isna(low) or pd.isna(high):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def job_tags(tags: pd.DataFrame, job: str) -> dict:
    """A job's row of the sweep's tag table (config_label and the swept values), without `job`; {} if absent."""
    row = tags[tags["job"] == job].drop(columns=["job"])
    return row.iloc[0].to_dict() if len(row) else {}


@dataclass(frozen=True)
class TextColumn:
    """One column of a terminal table: its header, how a row becomes its cell, its width (None: as
    wide as the header and the widest cell) and its side (right-aligned unless `left`)."""

    header: str
    cell: Callable[[pd.Series], str]
    width: int | None = None
    left: bool = False


def config_column(table: pd.DataFrame) -> TextColumn:
    """The column that names a config (`config_label` when present), left-aligned."""
    label = "config_label" if "config_label" in table else "config"
    return TextColumn("config", lambda r: str(r[label]), left=True)


def text_table(title: str, table: pd.DataFrame, columns: list[TextColumn]) -> str:
    """The title, a header line and one aligned line per row, cells joined by one space: how
    headlab-aggregate prints each table it wrote.

    >>> t = pd.DataFrame({"config": ["a", "bbbbbbb"], "n": [1, 22]})
    >>> print(text_table("t", t, [config_column(t), TextColumn("n", lambda r: str(r["n"]), 3)]))
    t
    config    n
    a         1
    bbbbbbb  22
    """
    rows = [[c.cell(r) for c in columns] for _, r in table.iterrows()]
    widths = [c.width if c.width is not None else max(len(c.header), *(len(row[i]) for row in rows))
              for i, c in enumerate(columns)]
    line = lambda cells: " ".join(f"{v:<{w}}" if c.left else f"{v:>{w}}"  # noqa: E731
                                  for v, w, c in zip(cells, widths, columns))
    return "\n".join([title, line([c.header for c in columns]), *(line(row) for row in rows)])