"""Figures of a `task=lm` run: the phase change on one step axis, and an induction head's pattern.

`plot_induction_phase`: induction score and previous-token score of every head over steps (one
line per head, coloured by layer), the probe loss and the ICL score beneath, sharing the step axis;
each head's onset (`summary.json` lm.induction_onset_steps) is a dotted vertical line, the loss drop
a dashed one. `plot_induction_grid`: one head's mean attention on the repeated probe, where an
induction head shows as the off-diagonal stripe half a probe back, one step right of the diagonal.
`build_scaling_figure` / `plot_induction_scaling`: a sweep's measured onsets in tokens against
sqrt(B C), with Aoyama et al.'s prediction N = T sqrt(B C) and the T that fits the measurements
(`headlab.sweep.induction_scaling`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from headlab.errors import DataError
from matplotlib.figure import Figure

from headlab.plots._figure import categorical_palette, figure_style, new_figure, save_figure


def plot_induction_phase(head_metrics: pd.DataFrame, run_curve: pd.DataFrame, path: str | os.PathLike,
                         onsets: dict[str, int | None] | None = None, loss_drop_step: int | None = None) -> Path:
    """head_metrics: the long table (step, layer, head, metric, value); run_curve: step, probe_loss, icl_score."""
    missing = {"step", "layer", "head", "metric", "value"} - set(head_metrics.columns)
    if missing or not {"step", "probe_loss", "icl_score"} <= set(run_curve.columns):
        raise DataError(path, f"expected head metrics (step, layer, head, metric, value) and a curve (step, probe_loss, "
                              f"icl_score); missing {sorted(missing) or 'curve columns'}")
    layers = sorted(head_metrics["layer"].unique())
    palette = categorical_palette(layers)
    with figure_style():
        fig = new_figure(7.0, 7.5)
        axes = fig.subplots(3, 1, sharex=True)
        for ax, metric, label in ((axes[0], "induction_score", "induction score"),
                                  (axes[1], "prev_token_score", "previous-token score")):
            rows = head_metrics[head_metrics["metric"] == metric]
            for (layer, head), group in rows.groupby(["layer", "head"]):
                group = group.sort_values("step")
                ax.plot(group["step"], group["value"], color=palette[layer], lw=1.2, alpha=0.85,
                        label=f"L{layer}H{head}" if metric == "induction_score" else None)
            ax.set_ylabel(label)
            ax.set_ylim(0, 1)
        for name, step in (onsets or {}).items():
            if step is not None:
                axes[0].axvline(step, color="grey", ls=":", lw=1)
        curve = run_curve.sort_values("step")
        axes[2].plot(curve["step"], curve["probe_loss"], color="black", label="probe loss")
        axes[2].plot(curve["step"], curve["icl_score"], color="tab:red", label="ICL score (late - early loss)")
        axes[2].axhline(0, color="grey", lw=0.5)
        axes[2].set_ylabel("nats")
        axes[2].set_xlabel("step")
        if loss_drop_step is not None:
            for ax in axes:
                ax.axvline(loss_drop_step, color="black", ls="--", lw=0.8)
        axes[0].legend(ncol=4, fontsize="x-small", loc="upper left")
        axes[2].legend(fontsize="x-small", loc="center left")
    return save_figure(fig, path)


def plot_induction_grid(pattern: np.ndarray, path: str | os.PathLike, title: str) -> Path:
    """pattern: one head's mean attention `[q, k]` over the probe."""
    pattern = np.asarray(pattern, dtype=np.float64)
    if pattern.ndim != 2 or pattern.shape[0] != pattern.shape[1]:
        raise DataError(path, f"expected a square [q, k] pattern, got shape {list(pattern.shape)}")
    with figure_style():
        fig = new_figure(4.2, 3.8)
        ax = fig.subplots()
        image = ax.imshow(pattern, cmap="viridis", vmin=0, vmax=max(float(pattern.max()), 1e-9))
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
        ax.set_title(title, fontsize="small")
        fig.colorbar(image, ax=ax, shrink=0.8)
    return save_figure(fig, path)


MEASURED_LABEL = "measured onset (mean, 95 % CI over seeds)"
PREDICTED_LABEL = "prediction N = T sqrt(BC), T = 10^{t:g}"
FITTED_LABEL = "fit to the measurements, T = 10^{t:.2f}"
SCALING_COLUMNS = ("batch_size", "context", "onset_tokens_mean", "onset_tokens_ci95_low", "onset_tokens_ci95_high",
                   "predicted_tokens", "log10_T_implied")


def build_scaling_figure(table: pd.DataFrame) -> Figure:
    """table: `induction_scaling.csv`'s rows. Log-log: x = sqrt(B C), y = onset tokens; the measured
    configs as points with their interval (annotated B, C), the prediction as a line, and the line of
    the same slope through the measurements (T = 10^mean log10 T implied), when any config has an onset."""
    missing = set(SCALING_COLUMNS) - set(table.columns)
    if missing or table.empty:
        raise DataError("induction_scaling", f"expected a non-empty table with columns {sorted(SCALING_COLUMNS)}; "
                                             f"missing {sorted(missing) or 'rows'}")
    x = np.sqrt(table["batch_size"].to_numpy(float) * table["context"].to_numpy(float))
    predicted_t = float(np.log10(table["predicted_tokens"].iloc[0] / x[0]))
    line_x = np.geomspace(x.min() / 1.3, x.max() * 1.3, 50)
    fig = new_figure(5.5, 4.2)
    ax = fig.subplots()
    measured = table["onset_tokens_mean"].to_numpy(float)
    has = np.isfinite(measured) & (measured > 0)
    if has.any():
        low = np.nan_to_num(measured - table["onset_tokens_ci95_low"].to_numpy(float), nan=0.0)
        high = np.nan_to_num(table["onset_tokens_ci95_high"].to_numpy(float) - measured, nan=0.0)
        ax.errorbar(x[has], measured[has], yerr=[low[has], high[has]], fmt="o", color="tab:blue", capsize=3,
                    label=MEASURED_LABEL)
        for xi, yi, b, c in zip(x[has], measured[has], table["batch_size"][has], table["context"][has]):
            ax.annotate(f"B={b}, C={c}", (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize="x-small")
        fitted_t = float(np.nanmean(table["log10_T_implied"].to_numpy(float)[has]))
        ax.plot(line_x, 10.0 ** fitted_t * line_x, color="tab:blue", ls="--", lw=1, label=FITTED_LABEL.format(t=fitted_t))
    ax.plot(line_x, 10.0 ** predicted_t * line_x, color="black", lw=1.2, label=PREDICTED_LABEL.format(t=round(predicted_t, 2)))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("sqrt(batch size x context length)")
    ax.set_ylabel("training tokens at the induction onset")
    n_none = int((~has).sum())
    ax.set_title("induction onset vs Aoyama et al. (2025)" + (f"; {n_none} config(s) without an onset" if n_none else ""),
                 fontsize="small")
    ax.legend(fontsize="x-small", loc="upper left")
    return fig


def plot_induction_scaling(table: pd.DataFrame, path: str | os.PathLike) -> Path:
    with figure_style():
        fig = build_scaling_figure(table)
    return save_figure(fig, path)
