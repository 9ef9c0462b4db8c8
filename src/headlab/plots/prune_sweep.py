"""`figures/prune_sweep.png` of headlab-aggregate: what `headlab-prune` bought on each job of a sweep
(`sweep_prune_runs.csv`), next to what the founding article reports (section 5.2: 20-30 % of the
heads, about 15-20 % faster), so claim C10's verdict can be seen, not only read."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from headlab.errors import DataError
from headlab.plots._figure import figure_style, new_figure, save_figure
from headlab.plots.sweep import natural_key
from headlab.stats import mean_ci

# (column, axis label, the article's band or None, the no-effect line, the range the interval is clipped to)
PANELS = (("fraction_heads_pruned", "fraction of heads pruned", (0.2, 0.3), 0.0, (0.0, 1.0)),
          ("test_acc_drop", "test acc drop (before - after)", None, 0.0, (-1.0, 1.0)),
          ("speedup_b64", "speed-up at batch 64 (unpruned / pruned)", (1.15, 1.2), 1.0, (0.0, np.inf)))


def plot_prune_sweep(per_run: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write the figure of `build_prune_sweep_figure` (PNG, atomic)."""
    return save_figure(build_prune_sweep_figure(per_run), path)


def build_prune_sweep_figure(per_run: pd.DataFrame) -> Figure:
    """One panel per PANELS column; x = each (config, prune label), a dot per seed and the mean with its
    95% t-interval; the article's range shaded."""
    missing = [c for c in ("config_label", "label", *(p[0] for p in PANELS)) if c not in per_run.columns]
    if per_run.empty or missing:
        raise DataError("sweep_prune_runs", f"rows with columns {missing or 'config_label, label, ...'}")
    groups = sorted(per_run.groupby(["config_label", "label"]), key=lambda g: (natural_key(str(g[0][0])), g[0][1]))
    names = [str(config).replace(",", ",\n") + f"\n{label}" for (config, label), _ in groups]  # one override a line
    with figure_style():
        fig = new_figure(3.2 * len(PANELS), 3.4)
        axes = fig.subplots(1, len(PANELS))
        for ax, (column, title, band, zero, bounds) in zip(axes, PANELS):
            if band is not None:
                ax.axhspan(*band, color="tab:orange", alpha=0.15, linewidth=0, label="article")
            ax.axhline(zero, color="0.6", linewidth=0.8, linestyle=":")
            for x, (_, group) in enumerate(groups):
                values = pd.to_numeric(group[column], errors="coerce").to_numpy(float)
                values = values[np.isfinite(values)]
                jitter = np.linspace(-0.12, 0.12, len(values)) if len(values) > 1 else np.zeros(len(values))
                ax.plot(x + jitter, values, "o", color="tab:blue", alpha=0.5, markersize=4)
                ci = mean_ci(values, bounds=bounds)
                if ci.n:
                    low, high = (ci.low, ci.high) if ci.n > 1 else (ci.mean, ci.mean)
                    ax.errorbar([x + 0.3], [ci.mean], yerr=[[ci.mean - low], [high - ci.mean]], fmt="s", color="black",
                                markersize=4, capsize=3)
            ax.set_xticks(range(len(groups)), names, fontsize=6)
            ax.set_xlim(-0.6, len(groups) - 0.2)
            ax.set_title(title, fontsize=8)
            if band is not None:
                ax.legend(fontsize=6, loc="best")
        fig.suptitle("headlab-prune per job: seeds (dots), mean and 95% CI (squares)", fontsize=8)
    return fig
