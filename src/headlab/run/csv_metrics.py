"""metrics.csv across a restart: Lightning's CSV logger deletes an existing metrics.csv when it
starts, which would lose every row logged before the restart."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from headlab.store import atomic_write_with
from headlab.store.run_dir import METRICS_CSV

log = logging.getLogger("headlab.train")


@contextlib.contextmanager
def keep_csv_rows(output_dir: Path, resume_step: int | None) -> Iterator[None]:
    """Around a resumed run (from before its CSV logger starts): set aside the rows logged up to `resume_step`, then
    write metrics.csv = those rows + the rows logged since, under one header (also after a failure)."""
    stash = _stash(output_dir, resume_step) if resume_step is not None else None
    try:
        yield
    finally:
        if stash is not None:
            _restore(output_dir, stash)


def _stash(output_dir: Path, step: int) -> Path | None:
    """A file cut short by a kill keeps the rows that parse."""
    metrics = output_dir / METRICS_CSV
    if not metrics.is_file():
        return None
    import pandas as pd

    try:
        rows = pd.read_csv(metrics, on_bad_lines="skip")
    except (ValueError, pd.errors.ParserError) as err:  # empty or unreadable: nothing to keep
        log.warning("%s unreadable (%s): starting it afresh", metrics, err)
        return None
    rows = rows[pd.to_numeric(rows.get("step"), errors="coerce") <= step] if "step" in rows else rows.iloc[0:0]
    stash = output_dir / f".metrics.before-step{step}.csv"
    atomic_write_with(stash, lambda tmp: rows.to_csv(tmp, index=False))
    return stash


def _restore(output_dir: Path, stash: Path) -> None:
    import pandas as pd

    parts = [pd.read_csv(stash)]
    if (output_dir / METRICS_CSV).is_file():
        parts.append(pd.read_csv(output_dir / METRICS_CSV))
    merged = pd.concat(parts, ignore_index=True)
    atomic_write_with(output_dir / METRICS_CSV, lambda tmp: merged.to_csv(tmp, index=False))
    stash.unlink()
