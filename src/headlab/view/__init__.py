"""headlab-view: one offline HTML page per run or sweep (docs/view.md).

`write_view(path)` reads a run directory (or a sweep folder: it holds multirun.yaml) and writes
its `view.html`: the head grid over a step slider, a head's trajectories and role timeline, the
token view, or for a sweep the configs' divergence curves and the seeds' aligned head grids.
"""

from __future__ import annotations

from pathlib import Path

from headlab.store import RunDir, SweepDir, atomic_write_text, is_sweep_dir


def write_view(path: str | Path) -> Path:
    """Write `view.html` into the run or sweep folder `path`; returns its path."""
    from headlab.view.page import render_page

    if is_sweep_dir(path):
        from headlab.view.sweep_data import read_sweep

        data, out = read_sweep(path), SweepDir(path).view_path
    else:
        from headlab.view.load import read_run

        data, out = read_run(path), RunDir(path).view_path
    atomic_write_text(out, render_page(data))
    return out


__all__ = ["write_view"]
