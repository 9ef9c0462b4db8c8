"""metrics.csv across a restart: Lightning's CSV logger deletes an existing metrics.csv when it
starts, which would lose every row logged before the restart.

The rows logged up to the resumed step are set aside in one stash file, `.metrics.kept.csv`, and
merged back when the run ends. Every step is safe against a kill at any instant, also a second
kill during the resume: the stash is only ever replaced atomically by a superset of what it held
(a resume that finds a stash from an earlier, killed resume merges it in first), and metrics.csv
is recognised as already merged when it starts with the stash's rows, so nothing is lost or doubled.
"""

from __future__ import annotations

import contextlib
import csv
import logging
from collections.abc import Iterator
from pathlib import Path

from headlab.store import RunDir, atomic_write_with
from headlab.store.run_dir import METRICS_CSV

log = logging.getLogger("headlab.train")
KEPT = ".metrics.kept.csv"


@contextlib.contextmanager
def keep_csv_rows(run: RunDir, resume_step: int | None) -> Iterator[None]:
    """Around a resumed run (from before its CSV logger starts): set aside the rows logged up to `resume_step`, then
    write metrics.csv = those rows + the rows logged since, under one header (also after a failure)."""
    output_dir = run.path
    stash = _stash(output_dir, resume_step) if resume_step is not None else None
    try:
        yield
    finally:
        if stash is not None:
            _restore(output_dir, stash)


def _read(path: Path):
    """A CSV as text cells ('' for empty), without the rows that cannot be whole: a last line cut short
    (no line end: a kill mid-write) or a row whose field count differs from the header's. Each dropped
    row is a warning naming the file and the line, never silent; the resume logs a cut-off step again."""
    import pandas as pd

    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:  # unreadable: nothing to keep
        log.warning("%s unreadable (%s): starting it afresh", path, err)
        return None
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        log.warning("%s has no header line: starting it afresh", path)
        return None
    header, rows = next(csv.reader([lines[0]])), []
    for number, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        cells = next(csv.reader([line]), [])
        if number == len(lines) and not text.endswith(("\n", "\r")):
            log.warning("%s: line %d dropped: cut short (no line end, as a kill during the write leaves it); "
                        "the resumed run logs its step again", path, number)
        elif len(cells) != len(header):
            log.warning("%s: line %d dropped: %d field(s) where the header has %d", path, number, len(cells), len(header))
        else:
            rows.append(cells)
    return pd.DataFrame(rows, columns=header, dtype=str) if rows else pd.DataFrame(columns=header, dtype=str)


def _starts_with(rows, kept) -> bool:
    """`rows` begins with exactly the rows of `kept` (metrics.csv already holds the stash merged in)."""
    if rows is None or len(rows) < len(kept) or not set(kept.columns) <= set(rows.columns):
        return False
    head = rows.iloc[: len(kept)][list(kept.columns)].fillna("").reset_index(drop=True)
    return bool((head.values == kept.fillna("").reset_index(drop=True).values).all())


def _all_rows(output_dir: Path):
    """Every row the run has: the stash of an earlier resume (if its merge never happened) + metrics.csv."""
    import pandas as pd

    current, kept = _read(output_dir / METRICS_CSV), _read(output_dir / KEPT)
    if kept is None or len(kept) == 0 or _starts_with(current, kept):
        return current
    if current is None:
        return kept
    # a row of the resumed step flushed after its checkpoint is logged again by the resume: same cells
    return _union(kept, current)


def _union(*frames):
    """The rows of `frames` in order, each once. A column one frame lacks is an empty cell there, as in the file:
    left as NaN, a row repeated by a resume would differ from its copy wherever the later rows added a column
    (a validation metric) and be kept twice."""
    import pandas as pd

    return pd.concat(frames, ignore_index=True).fillna("").drop_duplicates(ignore_index=True)


def _stash(output_dir: Path, step: int) -> Path | None:
    import pandas as pd

    rows = _all_rows(output_dir)
    if rows is None:
        return None
    rows = rows[pd.to_numeric(rows["step"], errors="coerce") <= step] if "step" in rows else rows.iloc[0:0]
    stash = output_dir / KEPT
    atomic_write_with(stash, lambda tmp: rows.to_csv(tmp, index=False))  # replaces a stash only by a superset
    return stash


def _restore(output_dir: Path, stash: Path) -> None:
    merged = _all_rows(output_dir)
    if merged is not None:
        merged = _union(merged)
        atomic_write_with(output_dir / METRICS_CSV, lambda tmp: merged.to_csv(tmp, index=False))
    stash.unlink(missing_ok=True)  # a kill before this line: the next resume sees metrics.csv starts with it
