"""Head-by-head similarity matrices at one measurement point: which heads are redundant."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from headlab.errors import ConfigError, DataError
from headlab.plots._figure import figure_style, new_figure, save_figure
from headlab.plots._frames import checked_metrics, checked_table

DEFAULT_METRICS = ("js", "corr", "qk_cosine")

_COLUMNS = ("step", "layer", "head_a", "head_b", "metric", "value")
_KEYS = ("step", "layer", "head_a", "head_b", "metric")
_SOURCE = "head_pairs"
# Numbers in the cells only while a cell is big enough to read them.
_ANNOTATE_MAX_HEADS = 8


def plot_head_similarity(
    head_pairs: pd.DataFrame,
    path: str | os.PathLike,
    step: int | None = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> Path:
    """Write the similarity heat maps of one run's `head_pairs` table to `path` (PNG, atomic)."""
    return save_figure(build_head_similarity_figure(head_pairs, step=step, metrics=metrics), path)


def build_head_similarity_figure(
    head_pairs: pd.DataFrame, step: int | None = None, metrics: Sequence[str] = DEFAULT_METRICS
) -> Figure:
    """One `[head_a, head_b]` heat map per (metric row, layer column) at `step` (default: last).

    Each metric row shares one colour scale (diverging around 0 when the values go negative),
    so layers compare at a glance. Metrics absent at that step are skipped and named.
    """
    wanted = checked_metrics(metrics)
    df = checked_table(head_pairs, _SOURCE, _COLUMNS, _KEYS)
    if df.empty:
        raise DataError(_SOURCE, "the table has no rows")
    steps = sorted(int(s) for s in df["step"].unique())
    step = steps[-1] if step is None else step
    if step not in steps:
        raise ConfigError("step", step, f"a measured step, one of {steps}")
    at = df[df["step"] == step]
    available = sorted(map(str, at["metric"].unique()))
    present = [m for m in wanted if m in available]
    if not present:
        raise DataError(_SOURCE, f"none of the metrics {wanted} at step {step}; available: {available}")
    layers = sorted(at["layer"].unique())
    matrices = {(m, layer): _matrix(at, m, layer) for m in present for layer in layers}
    n_heads = max(mat.shape[0] for mat in matrices.values())
    annotate = n_heads <= _ANNOTATE_MAX_HEADS
    panel = max(2.4, 0.22 * n_heads)
    with figure_style():
        fig = new_figure(panel * len(layers) + 1.2, panel * len(present) + 0.6)
        axes = fig.subplots(len(present), len(layers), squeeze=False)
        for i, metric in enumerate(present):
            _draw_metric_row(fig, axes[i], metric, [matrices[(metric, layer)] for layer in layers], layers, annotate)
        skipped = [m for m in wanted if m not in available]
        fig.suptitle(f"head-to-head similarity at step {step}" + (f"\n(absent, skipped: {', '.join(skipped)})" if skipped else ""))
    return fig


def _draw_metric_row(
    fig: Figure, row: np.ndarray, metric: str, matrices: list[pd.DataFrame], layers: list, annotate: bool
) -> None:
    """One metric across layers on one colour scale, with one colourbar for the row."""
    scale = _colour_scale(matrices)
    mesh = None
    for ax, matrix, layer in zip(row, matrices, layers):
        if matrix.empty:  # this metric was not measured for this layer
            ax.set_axis_off()
            continue
        sns.heatmap(
            matrix, ax=ax, cbar=False, square=True, annot=annotate, fmt=".2f",
            annot_kws={"fontsize": 6}, linewidths=0.3 if annotate else 0.0, **scale,
        )
        ax.set_title(f"{metric} · L{layer}")
        ax.tick_params(axis="y", labelrotation=0)
        mesh = ax.collections[0]
    if mesh is not None:
        fig.colorbar(mesh, ax=list(row), label=metric, shrink=0.9)


def _matrix(at: pd.DataFrame, metric: str, layer: int) -> pd.DataFrame:
    """`[head_a, head_b]` for one metric and layer, square even if a pair is missing (NaN)."""
    rows = at[(at["metric"] == metric) & (at["layer"] == layer)]
    heads = sorted(set(rows["head_a"]) | set(rows["head_b"]))
    matrix = rows.pivot(index="head_a", columns="head_b", values="value").reindex(index=heads, columns=heads)
    labels = [f"H{h}" for h in heads]
    return pd.DataFrame(matrix.to_numpy(dtype=np.float64), index=labels, columns=labels)


def _colour_scale(matrices: list[pd.DataFrame]) -> dict:
    values = np.concatenate([m.to_numpy().ravel() for m in matrices])
    values = values[np.isfinite(values)]
    if values.size and values.min() < 0:
        limit = float(np.abs(values).max())
        return {"cmap": "vlag", "vmin": -limit, "vmax": limit}  # symmetric: white at 0
    top = float(values.max()) if values.size and values.max() > 0 else 1.0
    return {"cmap": "rocket_r", "vmin": 0.0, "vmax": top}
