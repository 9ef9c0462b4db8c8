"""All figures of one run directory, from whatever measurements the run left behind."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from headlab.errors import DataError
from headlab.plots.attention_grid import plot_attention_grid
from headlab.plots.similarity import DEFAULT_METRICS as PAIR_METRICS
from headlab.plots.similarity import plot_head_similarity
from headlab.plots.trajectories import DEFAULT_METRICS as HEAD_METRICS_PLOTTED
from headlab.plots.trajectories import ROLE_METRIC, plot_metric_trajectories, plot_role_timeline
from headlab.store import ATTENTION_MAPS, RunDir, read_table
from headlab.store.run_dir import (  # FIGURES_DIR: re-exported by headlab.plots
    ATTENTION_GRID_FIGURE,
    FIGURES_DIR,
    HEAD_SIMILARITY_FIGURE,
    METRIC_TRAJECTORIES_FIGURE,
    ROLE_TIMELINE_FIGURE,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AttentionMaps:
    """The contents of `attention_maps.npz`: `mean_pattern [layer, head, q, k]`, `roles [layer, head]`."""

    mean_pattern: np.ndarray
    step: int | None
    roles: list[list[str]] | None


def write_run_figures(run_dir: str | os.PathLike) -> list[Path]:
    """Write `run_dir/figures/*.png` and return the paths written.

    A run that stopped early, or measured only some things, still gets the figures its files
    allow: a missing input skips its figure, never raises. Malformed inputs do raise DataError.
    """
    run = RunDir(run_dir)
    written: list[Path] = []
    maps = load_attention_maps(run.attention_maps_path)
    if maps is not None:
        title = "mean attention" + (f" at step {maps.step}" if maps.step is not None else "")
        written.append(plot_attention_grid(maps.mean_pattern, run.figure(ATTENTION_GRID_FIGURE), roles=maps.roles, title=title))
    metrics = _read_optional(run.head_metrics_path)
    if metrics is not None and _has_any(metrics, HEAD_METRICS_PLOTTED, run.head_metrics_path):
        written.append(plot_metric_trajectories(metrics, run.figure(METRIC_TRAJECTORIES_FIGURE), events=_events(run)))
    if metrics is not None and _has_any(metrics, (ROLE_METRIC,), run.head_metrics_path):
        written.append(plot_role_timeline(metrics, run.figure(ROLE_TIMELINE_FIGURE)))
    pairs = _read_optional(run.head_pairs_path)
    if pairs is not None and _has_any(pairs, PAIR_METRICS, run.head_pairs_path):
        written.append(plot_head_similarity(pairs, run.figure(HEAD_SIMILARITY_FIGURE)))
    return written


def load_attention_maps(path: str | os.PathLike) -> AttentionMaps | None:
    """Read `attention_maps.npz` without pickle; None if the file does not exist."""
    path = Path(path)
    if not path.is_file():
        log.info("no %s: skipping the attention grid", path)
        return None
    with np.load(path, allow_pickle=False) as npz:
        if "mean_pattern" not in npz.files:
            raise DataError(path, f"no 'mean_pattern' array; has {sorted(npz.files)}")
        try:
            roles = npz["roles"].astype(str).tolist() if "roles" in npz.files else None
        except ValueError as exc:  # object arrays need pickle, which a data file must not require
            raise DataError(path, f"'roles' must be a string array [layer, head] ({exc})") from None
        step = int(npz["step"]) if "step" in npz.files else None
        return AttentionMaps(mean_pattern=np.asarray(npz["mean_pattern"], dtype=np.float64), step=step, roles=roles)


def _events(run: RunDir) -> list[tuple[int, str]]:
    """(step, label) of each intervention the run applied (`interventions.json`; none: [])."""
    import json

    path = run.interventions_path
    if not path.is_file():
        return []
    return [(int(e["applied_step"]), f"{e['kind']} {e['heads']}") for e in json.loads(path.read_text(encoding="utf-8"))
            if e.get("applied_step") is not None]


def _read_optional(table_dir: Path) -> pd.DataFrame | None:
    try:
        return read_table(table_dir)
    except FileNotFoundError:
        log.info("no measurements in %s: skipping its figures", table_dir)
        return None


def _has_any(df: pd.DataFrame, metrics: tuple[str, ...], source: Path) -> bool:
    if "metric" not in df.columns:
        return True  # let the plot function report the malformed table
    found = bool(set(metrics) & set(df["metric"].unique()))
    if not found:
        log.info("%s has none of %s: skipping that figure", source, list(metrics))
    return found
