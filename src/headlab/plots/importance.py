"""Which heads matter: importance heat maps (layers x heads) beside the role map, and keep-top-k curves."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from headlab.analysis.roles import ROLES
from headlab.errors import DataError
from headlab.interventions.onset import importance_onset, importance_shares
from headlab.measure import TASK  # the `{metric}@task` suffix: metrics from the decision's queries
from headlab.plots._figure import categorical_palette, figure_style, new_figure, save_figure

PANELS = (("ablation_dloss", "ablation: val loss increase"), ("grad_importance", "gradient importance E|dL/dgate|"))


@dataclass(frozen=True)
class TaskView:
    """What each head does from the queries that feed the decision (`headlab.analysis.task_roles`), for the
    importance figure: `queries` in words ("[CLS]", "every token"), the task roles `[layer][head]`, and
    per layer the measurement's metrics (`{metric}@task` -> `[head]`, `headlab.measure.Measurement.head_metrics`)."""

    queries: str
    roles: Sequence[Sequence[str]]
    metrics: Sequence[Mapping[str, Any]]


# Cell labels of the "what it reads" panel: headlab.report's place words, shortened.
_SHORT = {"the last token": "last", "[CLS]": "CLS", "itself ([CLS])": "self", "punctuation": "punct",
          "the previous token": "prev", "the next token": "next", "the first token": "first", "itself": "self"}


def plot_importance(head_importance: pd.DataFrame, path: str | os.PathLike, step: int,
                    roles: Sequence[Sequence[str]] | None = None, curves: pd.DataFrame | None = None,
                    task: TaskView | None = None) -> Path:
    """Write the importance figure of one checkpoint `step` to `path` (PNG, atomic)."""
    return save_figure(build_importance_figure(head_importance, step, roles, curves, task), path)


def build_importance_figure(head_importance: pd.DataFrame, step: int, roles: Sequence[Sequence[str]] | None = None,
                            curves: pd.DataFrame | None = None, task: TaskView | None = None) -> Figure:
    """Heat maps `[layer, head]` of ablation and gradient importance, the role map, and the
    accuracy when only the top-k heads of each ranking are kept (blank cells: pruned heads).

    With `task`, a second row under the importance: the all-query role, the task role, and what each head
    reads from the decision's queries (`reading_grid`: the place and its mass, or content and its top key):
    an important head beside what it reads for the decision, which the all-query role often cannot show."""
    rows = head_importance[head_importance["step"] == step]
    if rows.empty:
        raise DataError("head_importance", f"no rows at step {step}; steps: {sorted(int(s) for s in head_importance['step'].unique())}")
    grids = [_grid(rows, metric) for metric, _ in PANELS]
    n_layers, n_heads = grids[0].shape
    if task is not None:
        return _importance_with_task(grids, step, roles, curves, task, n_layers, n_heads)
    panels = len(PANELS) + (roles is not None) + (curves is not None)
    with figure_style():
        fig = new_figure(3.2 * panels + 0.5, float(np.clip(1.2 + 0.45 * n_layers, 2.6, 12.0)))
        axes = list(fig.subplots(1, panels, squeeze=False)[0])
        _draw_importance(axes, grids, n_layers, n_heads)
        if roles is not None:
            _draw_roles(axes[len(PANELS)], roles, n_heads)
        if curves is not None:
            _draw_curves(axes[-1], curves[curves["step"] == step])
        fig.suptitle(f"head importance at step {step}")
    return fig


def _importance_with_task(grids: list[np.ndarray], step: int, roles: Sequence[Sequence[str]] | None,
                          curves: pd.DataFrame | None, task: TaskView, n_layers: int, n_heads: int) -> Figure:
    """Row 1: ablation, gradient importance, keep-top-k; row 2: role (every query), task role, what each head reads."""
    height = float(np.clip(1.2 + 0.45 * n_layers, 2.6, 12.0))
    with figure_style():
        fig = new_figure(3.2 * 3 + 0.5, 2 * height + 0.6)
        top, bottom = fig.subplots(2, 3, squeeze=False)
        _draw_importance(top[:2], grids, n_layers, n_heads)
        if curves is not None:
            _draw_curves(top[2], curves[curves["step"] == step])
        else:
            top[2].set_axis_off()
        names = sorted({r for table in (roles or [], task.roles) for layer in table for r in layer})
        if roles is not None:
            _draw_roles(bottom[0], roles, n_heads, "role (every query)", names)
        else:
            bottom[0].set_axis_off()
        _draw_roles(bottom[1], task.roles, n_heads, f"task role (from {task.queries})", names)
        _draw_reading(bottom[2], task, n_layers, n_heads)
        fig.suptitle(f"head importance at step {step}, and what each head reads from {task.queries}")
    return fig


def _draw_importance(axes: Sequence[Axes], grids: list[np.ndarray], n_layers: int, n_heads: int) -> None:
    for ax, grid, (_, title) in zip(axes, grids, PANELS):
        sns.heatmap(np.ma.masked_invalid(grid), ax=ax, cmap="rocket_r", annot=n_heads * n_layers <= 64, fmt=".2g",
                    annot_kws={"fontsize": 6}, cbar_kws={"shrink": 0.8}, mask=~np.isfinite(grid))
        _label_grid(ax, n_layers, n_heads, title)


def reading_grid(task: TaskView, n_layers: int, n_heads: int) -> tuple[np.ndarray, list[list[str]]]:
    """(number `[layer, head]`, short label) of what each head does from the decision's queries, in the words
    of `headlab.report.reading` on the `@task` metrics: the place it attends and the mass there ("last"),
    "spread" and its entropy_norm, "content" or "none" and its top key's weight; NaN / "" where unmeasured."""
    from headlab.report import reading  # the report's rule, so figure and report say the same of a head

    number, labels = np.full((n_layers, n_heads), np.nan), [[""] * n_heads for _ in range(n_layers)]
    for layer, metrics in enumerate(task.metrics[:n_layers]):
        for head in range(n_heads):
            values = {name: float(np.asarray(v, dtype=np.float64).reshape(-1)[head]) for name, v in metrics.items()
                      if name.endswith(f"@{TASK}") and np.asarray(v).size > head}
            kind, number[layer, head], words = reading(values, task.queries, f"@{TASK}")
            labels[layer][head] = _SHORT.get(words, words) if kind == "place" else {"broad": "spread"}.get(kind, kind)
    return number, labels


def _draw_reading(ax: Axes, task: TaskView, n_layers: int, n_heads: int) -> None:
    number, labels = reading_grid(task, n_layers, n_heads)
    annot = np.array([[f"{w}\n{m:.2f}" if w else "" for w, m in zip(row_w, row_m)] for row_w, row_m in zip(labels, number)])
    sns.heatmap(np.ma.masked_invalid(number), ax=ax, cmap="mako_r", vmin=0.0, vmax=1.0, mask=~np.isfinite(number),
                annot=annot if n_heads * n_layers <= 64 else False, fmt="", annot_kws={"fontsize": 6},
                cbar_kws={"shrink": 0.8, "label": "mass there / top key / entropy"})
    _label_grid(ax, n_layers, n_heads, f"what it reads from {task.queries}")


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


def _draw_roles(ax: Axes, roles: Sequence[Sequence[str]], n_heads: int, title: str = "role (probe set)",
                names: Sequence[str] | None = None) -> None:
    """The role map; `names`: the roles the palette is built on (shared by maps drawn side by side)."""
    shown = sorted({r for layer in roles for r in layer})
    names = list(names) if names is not None else shown
    palette = categorical_palette(names)
    ids = np.full((len(roles), n_heads), np.nan)
    for layer, layer_roles in enumerate(roles):
        ids[layer, : len(layer_roles)] = [names.index(r) for r in layer_roles]
    ax.imshow(np.ma.masked_invalid(ids), cmap=ListedColormap([palette[n] for n in names]).with_extremes(bad="white"),
              norm=BoundaryNorm(np.arange(len(names) + 1) - 0.5, len(names)), aspect="auto", interpolation="nearest")
    if len(roles) * n_heads <= 64:  # the name in each cell, as the heat maps beside it carry their numbers
        for layer, layer_roles in enumerate(roles):
            for head, role in enumerate(layer_roles):
                ax.text(head, layer, role.replace("_", "\n"), ha="center", va="center", fontsize=6)
    ax.set_xticks(range(n_heads), [f"H{h}" for h in range(n_heads)], fontsize=7)
    ax.set_yticks(range(len(roles)), [f"L{layer}" for layer in range(len(roles))], fontsize=7)
    ax.legend(handles=[Patch(facecolor=palette[n], label=n) for n in shown], fontsize=6, loc="upper left",
              bbox_to_anchor=(0.0, -0.2), ncol=2)
    ax.set_title(title, fontsize=8)


def _draw_curves(ax: Axes, curves: pd.DataFrame) -> None:
    top = curves[(curves["curve"] == "keep_top_k") & (curves["metric"] == "acc")]
    palette = categorical_palette(sorted(top["ranking"].unique()))
    for ranking, rows in top.groupby("ranking"):
        ax.plot(rows["k"], rows["value"], marker=".", label=ranking, color=palette[ranking])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # k counts heads
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


# ---------------------------------------------------------------- importance over training, with roles
TIMELINE_METRICS = {
    "ablation_dloss": "ablation importance (val loss increase, kept checkpoints)",
    "grad_importance": "gradient importance (E|dL/dgate| on the probe, head measurements)",
}


def importance_trajectory(head_importance: pd.DataFrame | None, head_metrics: pd.DataFrame | None) -> tuple[pd.DataFrame, str] | None:
    """The importance trajectory the run has, as (rows `step, layer, head, value`, metric): ablation at
    two or more checkpoints (`headlab-importance RUN checkpoint=all`) first, else the callback's
    `grad_importance` at two or more head measurements; None when neither has two steps."""
    for table, metric in ((head_importance, "ablation_dloss"), (head_metrics, "grad_importance")):
        if table is None or table.empty:
            continue
        rows = table[table["metric"] == metric]
        if rows["step"].nunique() >= 2:
            return rows[["step", "layer", "head", "value"]].reset_index(drop=True), metric
    return None


def plot_importance_timeline(trajectory: pd.DataFrame, metric: str, path: str | os.PathLike,
                             roles: pd.DataFrame | None = None) -> Path:
    """Write the per-head importance-over-training figure (see `build_importance_timeline_figure`)."""
    return save_figure(build_importance_timeline_figure(trajectory, metric, roles), path)


def build_importance_timeline_figure(trajectory: pd.DataFrame, metric: str, roles: pd.DataFrame | None = None) -> Figure:
    """One panel per head (rows = layers): its SHARE of all heads' importance at each step (see
    `headlab.interventions.onset`: raw importance is large for every head early on, when the loss
    is), the background coloured by the head's role at each head measurement (`roles`: head_metrics
    rows of metric `role@task` when measured, else `role`; ids into `headlab.analysis.roles.ROLES`, the colours of the role
    timeline), a dotted line at an equal share (1 / heads) and a dashed one at the step from which
    the head keeps more than that. "Which head became important, at which step, and did it hold
    its role before or after" reads off one figure."""
    if trajectory.empty:
        raise DataError("importance trajectory", "no rows")
    table = trajectory.pivot_table(index="step", columns=["layer", "head"], values="value", aggfunc="mean").sort_index()
    shares = pd.DataFrame(importance_shares(table.to_numpy()), index=table.index, columns=table.columns)
    bar = 1.0 / shares.shape[1]
    n_layers, n_heads = int(trajectory["layer"].max()) + 1, int(trajectory["head"].max()) + 1
    colours = sns.color_palette("Set2" if len(ROLES) <= 8 else "husl", len(ROLES))
    # the task role when measured: from the decision's queries, where the all-query role is often `mixed` throughout
    role_metric = f"role@{TASK}" if roles is not None and not roles.empty and f"role@{TASK}" in set(roles["metric"]) else "role"
    role_rows = roles[roles["metric"] == role_metric] if roles is not None and not roles.empty else None
    last_step = int(table.index.max())
    top = float(np.nanmax(shares.to_numpy())) if np.isfinite(shares.to_numpy()).any() else 1.0
    shown: set[int] = set()
    with figure_style():
        fig = new_figure(1.9 * n_heads + 1.6, 1.35 * n_layers + 1.1)
        axes = fig.subplots(n_layers, n_heads, squeeze=False, sharex=True, sharey=True)
        for (layer, head), series in shares.items():
            ax = axes[int(layer)][int(head)]
            if role_rows is not None:
                shown |= _role_band(ax, role_rows, int(layer), int(head), last_step, colours)
            ax.plot(series.index, series.to_numpy(), color="black", linewidth=1.0, marker=".", markersize=3)
            ax.axhline(bar, color="0.35", linewidth=0.8, linestyle=":")
            onset = importance_onset(series.index.to_numpy(), series.to_numpy(), bar)
            if onset is not None:
                ax.axvline(onset, color="crimson", linestyle="--", linewidth=0.9)
            ax.set_title(f"L{layer}H{head}: " + ("not held" if onset is None else f"from step {onset}"), fontsize=7)
            ax.set_ylim(0.0, 1.05 * top)
            ax.tick_params(labelsize=6)
        for ax in axes[-1]:
            ax.set_xlabel("training step", fontsize=7)
        for row in axes:
            row[0].set_ylabel("share", fontsize=7)
        handles = [Patch(facecolor=colours[i], alpha=0.5, label=ROLES[i]) for i in sorted(shown)]
        if handles:
            fig.legend(handles=handles, title=role_metric, fontsize=6, title_fontsize=7, loc="outside right upper")
        which = "its task role (from the decision's queries)" if role_metric != "role" else "its role"
        fig.suptitle(f"share of {TIMELINE_METRICS.get(metric, metric)} per head; background: {which}\n"
                     f"dotted: an equal share (1/{shares.shape[1]}); dashed: the step from which it stays above", fontsize=8)
    return fig


def _role_band(ax: Axes, role_rows: pd.DataFrame, layer: int, head: int, last_step: int, colours: Sequence) -> set[int]:
    """Shade [step_i, step_i+1) with the head's role measured at step_i; returns the role ids drawn."""
    mine = role_rows[(role_rows["layer"] == layer) & (role_rows["head"] == head)].sort_values("step")
    steps, ids = mine["step"].to_numpy(), mine["value"].to_numpy()
    drawn: set[int] = set()
    for i, (start, role) in enumerate(zip(steps, ids)):
        if not np.isfinite(role) or not 0 <= int(role) < len(colours):
            continue
        end = steps[i + 1] if i + 1 < len(steps) else max(last_step, start)
        ax.axvspan(start, end if end > start else start + 1, color=colours[int(role)], alpha=0.5, linewidth=0)
        drawn.add(int(role))
    return drawn
