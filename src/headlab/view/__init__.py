"""headlab-view: one offline HTML page per run or sweep (docs/view.md).

`write_view(folder)` reads a run directory (`RunDir`) or a sweep folder (`SweepDir`) and writes
its `view.html`: the head grid over a step slider, a head's trajectories and role timeline, the
token view, or for a sweep the configs' divergence curves and the seeds' aligned head grids.
`ViewCommand` is `headlab-view`'s schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import MISSING

from headlab.store import RunDir, SweepDir, atomic_write_text
from headlab.store.faults import require_writable
from headlab.view.load import read_run
from headlab.view.page import render_page
from headlab.view.sweep_data import read_sweep


@dataclass
class ViewCommand:
    """`headlab-view PATH`: PATH is a run directory or a sweep folder (holds multirun.yaml); writes PATH/view.html."""

    path: str = MISSING  # a headlab run directory (head_metrics.parquet) or a Hydra multirun folder


def write_view(folder: RunDir | SweepDir) -> Path:
    """Write `view.html` into the run or sweep folder; returns its path. A folder that cannot take the
    page is refused before its tables are read (a sweep's can take a while)."""
    if folder.path.is_dir():
        require_writable(folder.path)
    data = read_sweep(folder) if isinstance(folder, SweepDir) else read_run(folder)
    atomic_write_text(folder.view_path, render_page(data))
    return folder.view_path


__all__ = ["ViewCommand", "write_view"]
