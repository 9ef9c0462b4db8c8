"""A run's `probe_patterns/` folder: per measurement, the attention of a few fixed probe sentences.

The training measurement keeps per-head sums only (the maps of the whole probe never stay in
memory), so what a head does on one sentence is gone once the step is over. headlab-view's token
view needs exactly that, so each measurement also writes one small file here
(`step{step:09d}.npz`, atomically, so a crash never leaves a torn one and a long run never rewrites
the earlier ones):

    patterns      float16 [layer, head, sentence, T, T]  attention of query i to key j, zero past a sentence's length
    lengths       int64   [sentence]                     real positions kept of each sentence (<= T)
    tokens        str     [sentence, T]                  each position's token ("" past the length)
    mean_pattern  float16 [layer, head, P, P]            the probe's mean map at this step (the head grid)
    step          int64

Plain arrays only: read without pickle.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from headlab.store.atomic import atomic_write_with
from headlab.store.faults import make_folder

_PART = re.compile(r"^step(\d{9})\.npz$")
KEYS = ("patterns", "lengths", "tokens", "mean_pattern", "step")


def pattern_part_name(step: int) -> str:
    """The file of one measurement: `step000000128.npz`."""
    return f"step{int(step):09d}.npz"


def write_pattern_part(folder: str | os.PathLike, step: int, patterns: np.ndarray, lengths: np.ndarray,
                       tokens: np.ndarray, mean_pattern: np.ndarray) -> Path:
    """Write one measurement's file (replacing an earlier one of the same step, as a resume re-measures)."""
    folder = make_folder(folder)
    path = folder / pattern_part_name(step)
    arrays = {"patterns": np.asarray(patterns, dtype=np.float16), "lengths": np.asarray(lengths, dtype=np.int64),
              "tokens": np.asarray(tokens, dtype=str), "mean_pattern": np.asarray(mean_pattern, dtype=np.float16),
              "step": np.int64(step)}
    atomic_write_with(path, lambda tmp: np.savez_compressed(tmp, **arrays))
    return path


def drop_pattern_parts_after(folder: str | os.PathLike, step: int) -> int:
    """Remove the files of steps after `step` (a resumed run measures them again). Returns the count."""
    folder = Path(folder)
    if not folder.is_dir():
        return 0
    stale = [p for p in folder.iterdir() if (m := _PART.match(p.name)) and int(m.group(1)) > step]
    for p in stale:
        p.unlink()
    return len(stale)


def read_pattern_parts(folder: str | os.PathLike) -> list[dict[str, Any]]:
    """Every measurement's arrays, in step order; [] when the run stored none (runs written before
    the token view existed, or `callbacks.head_metrics.probe_patterns=0`)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    parts = []
    for path in sorted(p for p in folder.iterdir() if _PART.match(p.name)):
        with np.load(path, allow_pickle=False) as z:
            parts.append({k: z[k] for k in KEYS})
    return parts


def read_last_pattern_part(folder: str | os.PathLike) -> dict[str, Any] | None:
    """The newest measurement's arrays (what the run's heads do at its end), None when the run stored none."""
    folder = Path(folder)
    paths = sorted(p for p in folder.iterdir() if _PART.match(p.name)) if folder.is_dir() else []
    if not paths:
        return None
    with np.load(paths[-1], allow_pickle=False) as z:
        return {k: z[k] for k in KEYS}
