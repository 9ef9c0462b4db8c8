"""Which heads matter: importance heat maps (layers x heads) beside the role map, and keep-top-k curves."""

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
from matplotlib.patches import Patch, Rectangle

from headlab.errors import DataError
from headlab.plots._figure import categorical_palette, figure_style, new_figure, save_figure

PANELS = (("ablation_dloss", "ablation: val loss increase"), ("grad_importance", "gradient importance E|dL/dgate|"))


def plot_importance(head_importance: pd.DataFrame, path: str | os.PathLike, step: int,
                    roles: Sequence[Sequence[str]] | None = None, curves: pd.DataFrame | None = None) -> Path:
    """Write the importance figure of one checkpoint `step` to `path` (PNG, atomic)."""
    return save_figure(build_importance_figure(head_importance, step, roles, curves), path)


def build_importance_figure(head_importance: pd.DataFrame, step: int, roles: Sequence[Sequence[str]] | None = None,
                            curves: pd.DataFrame | None = None) -> Figure:
    """Heat maps `[layer, head]` of ablation and gradient importance, the role map, and the
    accuracy when only the top-k heads of each ranking are kept (blank cells: pruned heads)."""
    rows = head_importance[head_importance["step"] == step]
    if rows.empty:
        raise DataError("head_importance", f"no rows at step {step}; steps: {sorted(head_importance['step'].unique())}")
    grids = [_grid(rows, metric) for metric, _ in PANELS]
    n_layers, n_heads = grids[0].shape
    panels = len(PANELS) + (roles is not None) + (curves is not None)
    with figure_style():
        fig = new_figure(3.2 * panels + 0.5, float(np.clip(1.2 + 0.45 * n_layers, 2.6, 12.0)))
        axes = list(fig.subplots(1, panels, squeeze=False)[0])
        for ax, grid, (_, title) in zip(axes, grids, PANELS):
            sns.heatmap(np.ma.masked_invalid(grid), ax=ax, cmap="rocket_r", annot=n_heads * n_layers <= 64, fmt=".2g",
                        annot_kws={"fontsize": 6}, cbar_kws={"shrink": 0.8}, mask=~np.isfinite(grid))
            _label_grid(ax, n_layers, n_heads, title)
        if roles is not None:
            _draw_roles(axes[len(PANELS)], roles, n_heads)
        if curves is not None:
            _draw_curves(axes[-1], curves[curves["step"] == step])
        fig.suptitle(f"head importance at step {step}")
    return fig


def _grid(rows: pd.DataFrame, metric: str) -> np.ndarray:
    sel = rows[rows["metric"] == metric]
    if sel.empty:
        raise DataError("head_importance", f"no {metric!r} rows; metrics: {sorted(rows['metric'].unique())}")
    grid = np.full((int(rows["layer"].max()) + 1, int(rows["head"].max()) + 1), np.nan)
    grid[sel["layer"].to_numpy(), sel["head"].to_numpy()] = sel["value"].to_numpy()
    return grid


def _label_grid(ax: Axes, n_layers: int, n_heads: int, title: str) -> None:
    ax.set_xticks(np.arange(n_heads) + 0.5, [f"H{h}" for h in range(n_heads)], fontsize=7)
    ax.set_yticks(np.arange(n_layers) + 0.5, [f"L{layer}" for layer in range(n_layers)], fontsize=7, rotation=0)
    ax.set_title(title, fontsize=8)


def _draw_roles(ax: Axes, roles: Sequence[Sequence[str]], n_heads: int) -> None:
    names = sorted({r for layer in roles for r in layer})
    palette = categorical_palette(names)
    ids = np.full((len(roles), n_heads), np.nan)
    for layer, layer_roles in enumerate(roles):
        ids[layer, : len(layer_roles)] = [names.index(r) for r in layer_roles]
    ax.imshow(np.ma.masked_invalid(ids), cmap=ListedColormap([palette[n] for n in names]).with_extremes(bad="white"),
              norm=BoundaryNorm(np.arange(len(names) + 1) - 0.5, len(names)), aspect="auto", interpolation="nearest")
    ax.set_xticks(range(n_heads), [f"H{h}" for h in range(n_heads)], fontsize=7)
    ax.set_yticks(range(len(roles)), [f"L{layer}" for layer in range(len(roles))], fontsize=7)
    ax.legend(handles=[Patch(facecolor=palette[n], label=n) for n in names], fontsize=6, loc="upper left",
              bbox_to_anchor=(0.0, -0.2), ncol=2)
    ax.set_title("role (probe set)", fontsize=8)


def _draw_curves(ax: Axes, curves: pd.DataFrame) -> None:
    top = curves[(curves["curve"] == "keep_top_k") & (curves["metric"] == "acc")]
    palette = categorical_palette(sorted(top["ranking"].unique()))
    for ranking, rows in top.groupby("ranking"):
        ax.plot(rows["k"], rows["value"], marker=".", label=ranking, color=palette[ranking])
    ax.set_xlabel("heads kept (most important first)", fontsize=7)
    ax.set_ylabel("val accuracy", fontsize=7)
    ax.legend(fontsize=6, title="ranking", title_fontsize=6)
    ax.set_title("keep top-k heads", fontsize=8)


def plot_prune_curve(prune_curve: pd.DataFrame, path: str | os.PathLike, metric: str = "val_acc") -> Path:
    """Write accuracy vs fraction of heads pruned, one line per ranking (dashed: with fine-tune)."""
    return save_figure(build_prune_curve_figure(prune_curve, metric), path)


def build_prune_curve_figure(prune_curve: pd.DataFrame, metric: str = "val_acc") -> Figure:
    """x = fraction of heads pruned, y = `metric`; the round that broke `max_drop` is drawn as an open marker."""
    rows = prune_curve[prune_curve["metric"] == metric]
    if rows.empty:
        raise DataError("prune_curve", f"no {metric!r} rows; metrics: {sorted(prune_curve['metric'].unique())}")
    palette = categorical_palette(sorted(rows["ranking"].unique()))
    with figure_style():
        fig = new_figure(5.5, 3.6)
        ax = fig.subplots()
        for (ranking, ft), line in rows.groupby(["ranking", "finetune_steps"]):
            line = line.sort_values("prune_step")
            style = "-" if ft == 0 else "--"
            label = f"{ranking}" + ("" if ft == 0 else f" + {ft} fine-tune steps")
            ax.plot(line["fraction_heads_pruned"], line["value"], style, marker="o", color=palette[ranking], label=label)
            broke = line[~line["accepted"].astype(bool)]
            ax.plot(broke["fraction_heads_pruned"], broke["value"], "o", color="white", markeredgecolor=palette[ranking])
        base = rows[rows["prune_step"] == 0]["value"]
        if len(base):
            ax.axhline(float(base.iloc[0]), color="0.6", linewidth=0.8, linestyle=":")
        ax.set_xlabel("fraction of heads pruned")
        ax.set_ylabel(metric.replace("_", " "))
        ax.legend(fontsize=7)
        ax.set_title("iterative head pruning (open marker: the round that exceeded max_drop)", fontsize=8)
    return fig


def plot_redundancy(redundancy: dict, path: str | os.PathLike) -> Path:
    """Write one JS matrix per layer with its near-duplicate clusters outlined (PNG, atomic)."""
    return save_figure(build_redundancy_figure(redundancy), path)


def build_redundancy_figure(redundancy: dict) -> Figure:
    """`redundancy` as `headlab-importance` computes it: `js` `[layer][head][head]`, `layers[i].clusters`,
    `js_threshold`, `step`. Cells at or below the threshold are the near-duplicate pairs."""
    matrices = [np.asarray(m, dtype=np.float64) for m in redundancy["js"]]
    with figure_style():
        fig = new_figure(3.0 * len(matrices) + 0.8, 3.2)
        axes = fig.subplots(1, len(matrices), squeeze=False)[0]
        vmax = max(float(m.max()) for m in matrices) or 1.0
        for ax, matrix, entry in zip(axes, matrices, redundancy["layers"]):
            image = ax.imshow(matrix, cmap="mako", vmin=0.0, vmax=vmax, interpolation="nearest")
            for cluster in entry["clusters"]:
                for a in cluster:
                    for b in cluster:
                        ax.add_patch(_cell(b, a))
            n = matrix.shape[0]
            ax.set_xticks(range(n), [f"H{h}" for h in range(n)], fontsize=6)
            ax.set_yticks(range(n), [f"H{h}" for h in range(n)], fontsize=6)
            ax.set_title(f"L{entry['layer']}: {entry['redundant_heads']} redundant", fontsize=8)
        fig.colorbar(image, ax=list(axes), shrink=0.8, label="JS (nats)")
        fig.suptitle(f"near-duplicate heads at step {redundancy['step']} (JS <= {redundancy['js_threshold']:.3f}, "
                     f"{redundancy['redundant_heads']} redundant)", fontsize=9)
    return fig


def _cell(x: int, y: int) -> Rectangle:
    return Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, edgecolor="orange", linewidth=1.5)
