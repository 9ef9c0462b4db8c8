"""Seaborn figures of a whole sweep, from the tables `headlab.sweep.aggregate_sweep` writes.

Every figure compares configs (hue = `config_label`, the overrides that differ between
configs); seeds of a config are drawn as a band (min to max over seeds around the mean), since
with 3 seeds a bootstrap interval would mostly show resampling noise. Heads are permutation
symmetric across seeds, so trajectories are per-layer means over heads, never "head 3".
Seaborn supplies the style and palettes; lines and bars are drawn with matplotlib from one
pandas aggregation each, so a sweep of dozens of configs still draws in about a second.
"""

from __future__ import annotations

import re

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from headlab.errors import DataError
from headlab.plots._figure import categorical_palette, figure_style, metric_by_layer_axes, new_figure, save_figure
from headlab.plots._frames import checked_metrics

TRAJECTORY_METRICS = ("entropy_norm", "mean_distance", "confidence", "special_attention", "prev_score", "dist_from_init")
DIVERGENCE_METRICS = ("js", "1-corr")
ACCURACY_METRICS = ("val_acc", "test_acc")
_HUE = "config_label"


def write_sweep_figures(
    fig_dir: str | os.PathLike,
    sweep: pd.DataFrame,
    heads: pd.DataFrame,
    layer_pairs: pd.DataFrame,
    summary: pd.DataFrame,
    factors: Sequence[str],
) -> list[Path]:
    """Write every sweep figure whose table has rows; returns the paths written."""
    fig_dir = Path(fig_dir)
    jobs = [
        ("metric_trajectories.png", sweep, lambda: build_sweep_trajectories_figure(sweep)),
        ("role_composition.png", heads, lambda: build_role_composition_figure(heads)),
        ("accuracy_vs_factor.png", summary, lambda: build_accuracy_figure(summary, factors)),
        ("head_divergence.png", layer_pairs, lambda: build_head_divergence_figure(layer_pairs)),
    ]
    return [save_figure(build(), fig_dir / name) for name, table, build in jobs if not table.empty and _drawable(name, table)]


def _drawable(name: str, table: pd.DataFrame) -> bool:
    """Skip figures whose metrics are all absent (e.g. single-head configs have no pairs)."""
    if name == "metric_trajectories.png":
        return bool(set(TRAJECTORY_METRICS) & set(table["metric"]))
    if name == "head_divergence.png":
        return bool(set(DIVERGENCE_METRICS) & set(table["metric"]))
    if name == "role_composition.png":
        return bool(table["final_role"].notna().any())
    return True


def build_sweep_trajectories_figure(sweep: pd.DataFrame, metrics: Sequence[str] = TRAJECTORY_METRICS) -> Figure:
    """Rows = metric, cols = layer: the per-run mean over heads vs training step, one line per
    config, band = range over seeds. `sweep`: the tidy `sweep.parquet` table."""
    _require(sweep, "sweep", ("job", _HUE, "step", "layer", "metric", "value"))
    present = [m for m in checked_metrics(metrics) if m in set(sweep["metric"])]
    if not present:
        raise DataError("sweep", f"none of {list(metrics)} is in the table")
    per_run = (sweep[sweep["metric"].isin(present)]
               .groupby([_HUE, "job", "step", "layer", "metric"], as_index=False)["value"].mean())
    return _facet_lines(per_run, present, "mean over heads of", "per-layer head metrics over training (band: range over seeds)")


def build_head_divergence_figure(layer_pairs: pd.DataFrame, metrics: Sequence[str] = DIVERGENCE_METRICS) -> Figure:
    """Rows = metric (mean pairwise JS divergence, 1 - correlation), cols = layer, vs step:
    rising curves are heads of a layer becoming different from each other."""
    _require(layer_pairs, "layer_pairs", ("job", _HUE, "step", "layer", "metric", "value"))
    present = [m for m in checked_metrics(metrics) if m in set(layer_pairs["metric"])]
    if not present:
        raise DataError("layer_pairs", f"none of {list(metrics)} is in the table")
    rows = layer_pairs[layer_pairs["metric"].isin(present)]
    title = "head-to-head divergence within a layer (band: range over seeds)"
    return _facet_lines(rows, present, "mean over head pairs of", title)


def _facet_lines(rows: pd.DataFrame, metrics: list[str], y_prefix: str, title: str) -> Figure:
    layers = sorted(rows["layer"].unique())
    configs = sorted(rows[_HUE].unique(), key=natural_key)
    palette = categorical_palette(configs)
    with figure_style():
        fig = new_figure(3.0 * len(layers) + 2.5, 2.2 * len(metrics) + 0.8)
        for ax, metric, layer, first_column in metric_by_layer_axes(fig, metrics, layers):
            _draw_seed_bands(ax, rows[(rows["metric"] == metric) & (rows["layer"] == layer)], palette)
            _symlog_steps(ax, rows["step"])
            ax.set_ylabel(f"{y_prefix}\n{metric}" if first_column else "")
        _config_legend(fig, palette)
        fig.suptitle(title)
    return fig


def _draw_seed_bands(ax: Axes, data: pd.DataFrame, palette: dict) -> None:
    """Per config: mean over seeds at each step, shaded from the seed minimum to the maximum.

    Drawn with matplotlib from one groupby (what `sns.lineplot(errorbar=("pi", 100))` shows,
    without its per-panel re-aggregation, which made a 6 x 2 grid take seconds)."""
    stats = data.groupby([_HUE, "step"])["value"].agg(["mean", "min", "max"]).reset_index()
    for config, line in stats.groupby(_HUE, sort=True):
        ax.plot(line["step"], line["mean"], color=palette[config], lw=1.2, marker="o", ms=2.5)
        ax.fill_between(line["step"], line["min"], line["max"], color=palette[config], alpha=0.2, lw=0)


def build_role_composition_figure(heads: pd.DataFrame, role_names: Sequence[str] | None = None) -> Figure:
    """Cols = layer: stacked bars of the mean number of heads per final role, per config
    (averaged over seeds, so bars of a config sum to its head count)."""
    _require(heads, "heads", ("job", _HUE, "layer", "final_role"))
    names = list(role_names) if role_names is not None else _role_order(heads["final_role"])
    n_runs = heads.groupby(_HUE)["job"].nunique()
    counts = heads.groupby([_HUE, "layer", "final_role"]).size().div(n_runs, level=_HUE).rename("heads").reset_index()
    layers, configs = sorted(counts["layer"].unique()), sorted(counts[_HUE].unique(), key=natural_key)
    colours = dict(zip(names, sns.color_palette("Set2" if len(names) <= 8 else "husl", len(names))))
    with figure_style():
        fig = new_figure(max(3.0, 0.5 * len(configs) + 1.5) * len(layers) + 1.5, 3.8)
        axes = fig.subplots(1, len(layers), squeeze=False, sharey=True)[0]
        for ax, layer in zip(axes, layers):
            table = counts[counts["layer"] == layer].pivot(index=_HUE, columns="final_role", values="heads")
            table = table.reindex(index=configs, columns=names).fillna(0.0)
            bottom = np.zeros(len(configs))
            for name in names:
                ax.bar(range(len(configs)), table[name].to_numpy(), bottom=bottom, color=colours[name], label=name, width=0.8)
                bottom += table[name].to_numpy()
            ax.set_xticks(range(len(configs)), configs, rotation=45, ha="right", fontsize=7)
            ax.set_title(f"L{layer}")
        axes[0].set_ylabel("heads (mean over seeds)")
        axes[-1].legend(title="final role", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
        fig.suptitle("role composition at the end of training")
    return fig


def build_accuracy_figure(summary: pd.DataFrame, factors: Sequence[str], metrics: Sequence[str] = ACCURACY_METRICS) -> Figure:
    """Rows = metric, cols = swept factor: mean over seeds with its 95% t-interval (the
    `_ci95_low/high` columns of `sweep_summary.csv`) at each factor value; one line per
    combination of the other factors. No factor varies: one point per config."""
    present = [m for m in checked_metrics(metrics) if f"{m}_mean" in summary.columns]
    if not present:
        raise DataError("summary", f"no '<metric>_mean' column for any of {list(metrics)}")
    factors = [f for f in factors if f in summary.columns] or [_HUE]
    with figure_style():
        fig = new_figure(3.4 * len(factors) + 2.0, 2.6 * len(present) + 0.6)
        axes = fig.subplots(len(present), len(factors), squeeze=False, sharey="row")
        for i, metric in enumerate(present):
            for j, factor in enumerate(factors):
                _draw_factor(axes[i, j], summary, metric, factor, [f for f in factors if f not in (factor, _HUE)])
                axes[i, j].set_ylabel(metric if j == 0 else "")
        fig.suptitle("accuracy vs swept factor (mean over seeds, 95% t-interval)")
    return fig


def _draw_factor(ax: Axes, summary: pd.DataFrame, metric: str, factor: str, others: list[str]) -> None:
    """Equally spaced factor values (sorted numerically when they are numbers), a small
    horizontal offset per line so intervals do not hide each other."""
    levels = _sorted_levels(summary[factor])
    groups = list(summary.groupby(others, dropna=False)) if others else [("", summary)]
    palette = sns.color_palette("tab10" if len(groups) <= 10 else "husl", len(groups))
    for k, (key, rows) in enumerate(groups):
        x = rows[factor].map({v: levels.index(v) for v in levels}).to_numpy(float) + 0.08 * (k - (len(groups) - 1) / 2)
        mean = rows[f"{metric}_mean"].to_numpy(float)
        low, high = rows.get(f"{metric}_ci95_low"), rows.get(f"{metric}_ci95_high")
        err = None if low is None else np.nan_to_num(np.vstack([mean - low.to_numpy(float), high.to_numpy(float) - mean]))
        order = np.argsort(x)
        label = ", ".join(f"{o}={v}" for o, v in zip(others, key if isinstance(key, tuple) else (key,))) if others else None
        ax.errorbar(x[order], mean[order], yerr=None if err is None else err[:, order], marker="o", capsize=3,
                    color=palette[k], label=label)
    ax.set_xticks(range(len(levels)), [str(v) for v in levels], rotation=45 if factor == _HUE else 0, fontsize=7)
    ax.set_xlabel(factor)
    if others and len(groups) > 1:
        ax.legend(fontsize=6)


def natural_key(label: str) -> tuple:
    """Sort key that orders the numbers inside config labels by value, not as text.

    >>> sorted(["model.n_heads=16", "model.n_heads=2", "model.n_heads=1"], key=natural_key)
    ['model.n_heads=1', 'model.n_heads=2', 'model.n_heads=16']
    """
    parts = re.split(r"(\d+(?:\.\d+)?(?:e-?\d+)?)", str(label))
    return tuple((1, float(part), "") if i % 2 else (0, 0.0, part) for i, part in enumerate(parts))


def _sorted_levels(values: pd.Series) -> list:
    levels = list(pd.unique(values.dropna()))
    try:
        return sorted(levels, key=float)
    except (TypeError, ValueError):
        return sorted(levels, key=str)


def _role_order(roles: pd.Series) -> list[str]:
    """Roles in headlab's canonical order when known (colours stay stable), others after."""
    present = [r for r in pd.unique(roles.dropna())]
    try:
        from headlab.analysis.roles import ROLES  # lazy: plots must not need analysis to import
    except ImportError:
        return sorted(present)
    return [r for r in ROLES if r in present] + sorted(r for r in present if r not in ROLES)


def _symlog_steps(ax: Axes, steps: pd.Series) -> None:
    positive = steps[steps > 0]
    ax.set_xscale("symlog", linthresh=float(max(1, positive.min())) if len(positive) else 1.0)


def _config_legend(fig: Figure, palette: dict) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, lw=1.5, label=str(name)) for name, c in palette.items()]
    fig.legend(handles=handles, loc="outside right upper", title="config", fontsize=7)


def _require(df: pd.DataFrame, source: str, columns: Sequence[str]) -> None:
    if not isinstance(df, pd.DataFrame) or df.empty:
        raise DataError(source, "expected a non-empty pandas DataFrame")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(source, f"missing columns {missing}; has {list(df.columns)}")
