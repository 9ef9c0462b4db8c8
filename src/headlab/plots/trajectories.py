"""Per-head metrics over training: when (and in which order) heads take their roles."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from headlab.errors import DataError
from headlab.plots._figure import categorical_palette, figure_style, metric_by_layer_axes, new_figure, save_figure
from headlab.plots._frames import checked_metrics, checked_table

DEFAULT_METRICS = ("entropy_norm", "mean_distance", "prev_score", "cls_attention", "distance_norm")
OPTIONAL_METRICS = ("grad_importance",)  # added to the default figure when the run measured them
ROLE_METRIC = "role"

_COLUMNS = ("step", "layer", "head", "metric", "value")
_KEYS = ("step", "layer", "head", "metric")
_SOURCE = "head_metrics"


def plot_metric_trajectories(
    head_metrics: pd.DataFrame,
    path: str | os.PathLike,
    metrics: Sequence[str] = DEFAULT_METRICS,
    log_x: bool = True,
    events: Sequence[tuple[int, str]] = (),
) -> Path:
    """Write the trajectories of one run's long `head_metrics` table to `path` (PNG, atomic)."""
    return save_figure(build_metric_trajectories_figure(head_metrics, metrics=metrics, log_x=log_x, events=events), path)


def build_metric_trajectories_figure(
    head_metrics: pd.DataFrame, metrics: Sequence[str] = DEFAULT_METRICS, log_x: bool = True,
    events: Sequence[tuple[int, str]] = (),
) -> Figure:
    """Facets rows = metric, cols = layer; one line per head, same colour for a head everywhere.

    The x axis is symlog by default: roles are mostly decided in the first few hundred steps,
    which a linear axis squeezes against the origin. Metrics absent from the table are skipped
    and named in the title; if none is present the available ones are listed in the error.
    `events` (step, label), e.g. an intervention, are dashed vertical lines on every panel.
    """
    wanted = checked_metrics(metrics)
    df = checked_table(head_metrics, _SOURCE, _COLUMNS, _KEYS)
    available = sorted(map(str, df["metric"].unique()))
    present = [m for m in wanted if m in available]
    if tuple(metrics) == DEFAULT_METRICS:
        present += [m for m in OPTIONAL_METRICS if m in available and m not in present]
    if not present:
        raise DataError(_SOURCE, f"none of the metrics {wanted} is in the table; available: {available}")
    absent = [m for m in wanted if m not in available]
    df = df[df["metric"].isin(present)]
    layers, heads = sorted(df["layer"].unique()), sorted(df["head"].unique())
    palette = categorical_palette(heads)
    with figure_style():
        fig = new_figure(2.8 * len(layers) + 1.2, 2.0 * len(present) + 0.8)
        for ax, metric, layer, first_column in metric_by_layer_axes(fig, present, layers):
            _draw_heads(ax, df[(df["metric"] == metric) & (df["layer"] == layer)], palette)
            _set_step_scale(ax, df["step"], log_x)
            for step, label in events:
                ax.axvline(step, color="0.3", ls="--", lw=1.0, label=label)
            ax.set_ylabel(metric if first_column else "")
        fig.legend(handles=_head_handles(palette), loc="outside right upper", title="head", fontsize=7)
        fig.suptitle(_trajectory_title(df, absent))
    return fig


def _draw_heads(ax: Axes, rows: pd.DataFrame, palette: dict) -> None:
    for head, series in rows.sort_values("step", kind="stable").groupby("head", sort=True):
        ax.plot(series["step"].to_numpy(), series["value"].to_numpy(), color=palette[head], lw=1.2, marker="o", ms=2.5, label=f"H{head}")


def _head_handles(palette: dict) -> list[Line2D]:
    return [Line2D([], [], color=colour, lw=1.5, label=f"H{head}") for head, colour in palette.items()]


def _set_step_scale(ax: Axes, steps: pd.Series, log_x: bool) -> None:
    if not log_x:
        return
    positive = steps[steps > 0]
    ax.set_xscale("symlog", linthresh=float(max(1, positive.min())) if len(positive) else 1.0)


def _trajectory_title(df: pd.DataFrame, absent: list[str]) -> str:
    run = f" — run {df['run_id'].iloc[0]}" if "run_id" in df.columns and len(df) else ""
    skipped = f"\n(absent, skipped: {', '.join(absent)})" if absent else ""
    return f"per-head metrics over training{run}{skipped}"


def plot_role_timeline(
    head_metrics: pd.DataFrame, path: str | os.PathLike, role_names: Sequence[str] | None = None
) -> Path:
    """Write the role-per-head-per-step heat map of one run to `path` (PNG, atomic)."""
    return save_figure(build_role_timeline_figure(head_metrics, role_names=role_names), path)


def build_role_timeline_figure(head_metrics: pd.DataFrame, role_names: Sequence[str] | None = None) -> Figure:
    """Rows = L{l}H{h}, cols = measurement step, colour = role id (metric "role").

    Role ids index `role_names`, by default `headlab.analysis.roles.ROLES`; a colour always
    means the same role, whichever roles a run happens to show. Unmeasured cells stay blank.
    """
    df = checked_table(head_metrics, _SOURCE, _COLUMNS, _KEYS)
    rows = df[df["metric"] == ROLE_METRIC]
    if rows.empty:
        available = sorted(map(str, df["metric"].unique()))
        raise DataError(_SOURCE, f"no {ROLE_METRIC!r} metric in the table; available: {available}")
    grid = rows.pivot(index=["layer", "head"], columns="step", values="value")  # [layer*head, step]
    ids = grid.to_numpy(dtype=np.float64)
    names = _checked_role_ids(ids, _role_names(role_names))
    colours = sns.color_palette("Set2" if len(names) <= 8 else "husl", len(names))
    with figure_style():
        fig = new_figure(float(np.clip(2.5 + 0.3 * ids.shape[1], 5.0, 16.0)), float(np.clip(1.2 + 0.16 * ids.shape[0], 2.5, 32.0)))
        ax = fig.subplots()
        ax.imshow(
            np.ma.masked_invalid(ids),
            cmap=ListedColormap(colours).with_extremes(bad="white"),
            norm=BoundaryNorm(np.arange(len(names) + 1) - 0.5, len(names)),
            aspect="auto",
            interpolation="nearest",
        )
        ax.set_yticks(range(ids.shape[0]), [f"L{layer}H{head}" for layer, head in grid.index], fontsize=6)
        stride = int(np.ceil(ids.shape[1] / 16))
        ax.set_xticks(range(0, ids.shape[1], stride), [str(s) for s in grid.columns[::stride]], rotation=45, fontsize=7)
        ax.set_xlabel("training step")
        handles = [Patch(facecolor=colour, label=name) for name, colour in zip(names, colours)]
        ax.legend(handles=handles, title="role", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
        ax.set_title("head roles over training")
    return fig


def _role_names(role_names: Sequence[str] | None) -> list[str] | None:
    """Explicit names, else the analysis package's ROLES; None when neither exists."""
    if role_names is not None:
        return checked_metrics(role_names, key="role_names")
    try:
        from headlab.analysis.roles import ROLES  # lazy: plots must not need analysis to import
    except ImportError:
        return None
    return list(ROLES)


def _checked_role_ids(ids: np.ndarray, names: list[str] | None) -> list[str]:
    """Role ids must be whole numbers indexing `names` (generic names when none are known)."""
    measured = ids[np.isfinite(ids)]
    if measured.size == 0:
        raise DataError(_SOURCE, f"every {ROLE_METRIC!r} value is NaN: no head was classified")
    if np.any(measured != np.round(measured)) or measured.min() < 0:
        raise DataError(_SOURCE, f"role ids must be non-negative integers, got {sorted(set(measured.tolist()))[:10]}")
    top = int(measured.max())
    if names is None:
        return [f"role {i}" for i in range(top + 1)]
    if top >= len(names):
        raise DataError(_SOURCE, f"role id {top} has no name; role_names has {len(names)}: {names}")
    return names
