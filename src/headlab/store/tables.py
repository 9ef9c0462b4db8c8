"""The per-run tidy tables: `head_metrics.parquet` and `head_pairs.parquet`.

Each table is a parquet *dataset folder*: every measurement point appends one part file,
written atomically, so a long run never rewrites the table and a crash never truncates it.
pandas, pyarrow, polars and duckdb read the folder as one table; `read_table` also sorts it
and drops parts past a given step (used when a run resumes from a checkpoint).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from headlab.errors import DataError
from headlab.store.atomic import atomic_write_with
from headlab.store.faults import make_folder

HEAD_METRIC_COLUMNS = ("run_id", "step", "epoch", "layer", "head", "metric", "value")
# A role row (`role`, `role@task`, `role@{token}`) names its role here; `value` keeps the name's index in
# `headlab.analysis.roles.ROLES`, so numeric readers (bifurcation steps, matching) read it as before.
# Other rows hold null; a table without role rows (an LM's, importance) has no such column. Tables written
# before 2026-12-03 have none either: `read_table` names their role rows from the ids.
ROLE_NAME = "role_name"
ROLE_METRIC = "role"
HEAD_PAIR_COLUMNS = ("run_id", "step", "epoch", "layer", "head_a", "head_b", "metric", "value")

_PART = re.compile(r"^part-(\d{9})-(\d{4})\.parquet$")


def head_metric_rows(
    run_id: str, step: int, epoch: int, per_layer: list[Mapping[str, np.ndarray]]
) -> pd.DataFrame:
    """Long-format rows from `per_layer[layer][metric] -> values [head]`."""
    blocks = [(layer, metric, np.asarray(values, dtype=np.float64).reshape(-1))
              for layer, metrics in enumerate(per_layer) for metric, values in metrics.items()]
    columns = {
        "layer": [np.full(v.size, layer) for layer, _, v in blocks],
        "head": [np.arange(v.size) for _, _, v in blocks],
        "metric": [np.full(v.size, metric, dtype=object) for _, metric, v in blocks],
        "value": [v for _, _, v in blocks],
    }
    frame = _finish(columns, run_id, step, epoch, HEAD_METRIC_COLUMNS)
    return with_role_names(frame)


def with_role_names(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with its `role_name` column filled where a role row (`role`, `role@task`, `role@{token}`) has
    none, from the row's id: an index into `ROLES`, append-only since the 2026-11-30 recalibration, so an old
    table's ids keep their names. Rows that are not roles get null; an id outside `ROLES` (or NaN) stays
    null. `frame` itself when it has no role rows and no such column."""
    metric = frame["metric"].astype(str)
    roles = ((metric == ROLE_METRIC) | metric.str.startswith(f"{ROLE_METRIC}@")).to_numpy(dtype=bool)
    if not roles.any() and ROLE_NAME not in frame:
        return frame  # no roles to name (an LM's scores, the importance tables): the column is left out
    frame = frame.copy()
    names = frame[ROLE_NAME].astype("string") if ROLE_NAME in frame else pd.Series(pd.NA, index=frame.index, dtype="string")
    missing = roles & names.isna().to_numpy()
    if missing.any():
        from headlab.analysis.roles import ROLES  # torch: only when a table needs naming (importing store stays light)

        ids = frame["value"].to_numpy(dtype=np.float64)[missing]
        known = np.isfinite(ids) & (ids >= 0) & (ids < len(ROLES)) & (ids == np.floor(np.nan_to_num(ids)))
        filled = np.array([ROLES[int(i)] if ok else None for i, ok in zip(ids, known)], dtype=object)
        names[missing] = pd.array(filled, dtype="string")
    names[~roles] = pd.NA
    frame[ROLE_NAME] = names
    return frame


def head_pair_rows(
    run_id: str, step: int, epoch: int, per_layer: list[Mapping[str, np.ndarray]]
) -> pd.DataFrame:
    """Long-format rows from `per_layer[layer][metric] -> matrix [head, head]`."""
    blocks = [(layer, metric, np.asarray(matrix, dtype=np.float64))
              for layer, metrics in enumerate(per_layer) for metric, matrix in metrics.items()]
    columns = {
        "layer": [np.full(m.size, layer) for layer, _, m in blocks],
        "head_a": [np.repeat(np.arange(m.shape[0]), m.shape[1]) for _, _, m in blocks],
        "head_b": [np.tile(np.arange(m.shape[1]), m.shape[0]) for _, _, m in blocks],
        "metric": [np.full(m.size, metric, dtype=object) for _, metric, m in blocks],
        "value": [m.ravel() for _, _, m in blocks],
    }
    return _finish(columns, run_id, step, epoch, HEAD_PAIR_COLUMNS)


def _finish(parts: dict[str, list[np.ndarray]], run_id: str, step: int, epoch: int,
            columns: tuple[str, ...]) -> pd.DataFrame:
    """One frame from per-block column arrays (one concatenation per column, not per block)."""
    data = {name: np.concatenate(arrays) if arrays else np.array([], dtype=object if name == "metric" else np.float64)
            for name, arrays in parts.items()}
    n = len(data["value"])
    df = pd.DataFrame({"run_id": np.full(n, str(run_id), dtype=object), "step": np.full(n, int(step), dtype=np.int64),
                       "epoch": np.full(n, int(epoch), dtype=np.int64), **data})
    df = df[list(columns)]
    return df.astype({"step": "int64", "epoch": "int64", "layer": "int64", "value": "float64"})


def append_part(table_dir: str | os.PathLike, step: int, rows: pd.DataFrame) -> Path:
    """Write `rows` as the next part file of the dataset folder, atomically."""
    table_dir = make_folder(table_dir)
    seq = sum(1 for p in table_dir.iterdir() if (m := _PART.match(p.name)) and int(m.group(1)) == step)
    path = table_dir / f"part-{step:09d}-{seq:04d}.parquet"
    atomic_write_with(path, lambda tmp: rows.to_parquet(tmp, index=False))
    return path


def drop_parts_after(table_dir: str | os.PathLike, step: int) -> int:
    """Remove the parts measured after `step` (a resumed run re-measures them). Returns the count."""
    table_dir = Path(table_dir)
    if not table_dir.is_dir():
        return 0
    removed = 0
    for p in table_dir.iterdir():
        m = _PART.match(p.name)
        if m and int(m.group(1)) > step:
            p.unlink()
            removed += 1
    return removed


def read_table(table_dir: str | os.PathLike) -> pd.DataFrame:
    """Read a dataset folder written by `append_part`, in a stable order."""
    table_dir = Path(table_dir)
    parts = sorted(p for p in table_dir.iterdir() if _PART.match(p.name)) if table_dir.is_dir() else []
    if not parts:
        raise FileNotFoundError(f"{table_dir}: no measurement parts found")
    df = pd.concat([read_parquet_file(p) for p in parts], ignore_index=True)
    if "head" in df.columns and "metric" in df.columns:  # head_metrics: role rows named (old tables: from their ids)
        df = with_role_names(df)
    keys = [c for c in ("step", "layer", "head", "head_a", "head_b", "metric") if c in df.columns]
    return df.sort_values(keys, kind="stable").reset_index(drop=True)


def read_parquet_file(path: str | os.PathLike) -> pd.DataFrame:
    """One parquet file; a damaged one (cut short by a copy, not parquet at all) is one `DataError` naming
    it. headlab writes every part atomically, so such a file was damaged after the run wrote it: reading
    on without it would quietly show a run that ends early."""
    from pyarrow.lib import ArrowException

    try:
        return pd.read_parquet(path)
    except FileNotFoundError:
        raise
    except (OSError, ValueError, ArrowException) as err:  # ArrowInvalid is a ValueError; truncated footers: OSError
        first = " ".join(str(err).split())[:160] or type(err).__name__
        raise DataError(path, f"cannot be read: truncated or not a parquet file ({type(err).__name__}: {first}); restore "
                              "it from the original run, or remove it to read the rest") from None


def replace_steps(path: str | os.PathLike, rows: pd.DataFrame, steps: set[int]) -> Path:
    """Write `rows` to the parquet file `path` atomically, keeping its rows of other steps (a re-measured
    checkpoint replaces its own rows only: headlab-importance, headlab-analyze-hf)."""
    path = Path(path)
    if path.is_file():
        old = read_parquet_file(path)
        rows = pd.concat([old[~old["step"].isin(steps)], rows], ignore_index=True)
    rows = rows.sort_values([c for c in ("step", "curve", "ranking", "layer", "head", "k", "metric") if c in rows.columns],
                            kind="stable").reset_index(drop=True)
    atomic_write_with(path, lambda tmp: rows.to_parquet(tmp, index=False))
    return path


def write_attention_maps(path: str | os.PathLike, last, first=None) -> Path:
    """A run's `attention_maps.npz` (`RunDir.attention_maps_path`): the mean maps `[layer, head, P, P]`, step and roles of the
    `last` measurement (and the maps and step of the `first`), plain arrays only (loadable without
    pickle by `headlab.plots.run_figures.load_attention_maps`)."""
    arrays = {"mean_pattern": last.mean_patterns, "step": np.int64(last.step), "roles": np.array(last.roles, dtype=str)}
    if first is not None:
        arrays.update(mean_pattern_first=first.mean_patterns, step_first=np.int64(first.step))
    path = Path(path)
    atomic_write_with(path, lambda tmp: np.savez_compressed(tmp, **arrays))
    return path
