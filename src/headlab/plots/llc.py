"""`figures/llc.png` of `headlab-llc`: each head's refined LLC over the sampled checkpoints, per layer.

One panel per layer, one line per head (+- its spread over chains; a hollow marker where the chains were
not flat, so that point needs longer chains), the whole model's LLC in a panel of its own above. A head's
induction onset (summary.json lm.induction_onset_steps) is a dotted tick in its colour, the probe-loss
drop a dashed black line: the rLLC of a head that forms a circuit should change around its onset. The
step axis is logarithmic when every step is > 0: the checkpoints are log-spaced.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from headlab.errors import DataError
from headlab.plots._figure import categorical_palette, figure_style, new_figure, save_figure

COLUMNS = {"step", "layer", "head", "metric", "value", "std", "flat"}


def plot_llc(estimates: pd.DataFrame, path: str | os.PathLike, *, onsets: Mapping[str, int | None] | None = None,
             loss_drop_step: int | None = None, roles: Sequence[Sequence[str]] | None = None) -> Path:
    """estimates: llc.parquet's rows (step, layer, head, metric `llc` / `rllc`, value, std, flat)."""
    missing = COLUMNS - set(estimates.columns)
    if missing:
        raise DataError(path, f"expected LLC estimates with columns {sorted(COLUMNS)}; missing {sorted(missing)}")
    heads = estimates[estimates["metric"] == "rllc"]
    whole = estimates[estimates["metric"] == "llc"].sort_values("step")
    if heads.empty and whole.empty:
        raise DataError(path, "no LLC estimates to draw")
    layers = sorted(int(layer) for layer in heads["layer"].unique())
    palette = categorical_palette(sorted(int(h) for h in heads["head"].unique()))
    log_x = bool((estimates["step"] > 0).all()) and estimates["step"].nunique() > 1
    panels = (["whole"] if not whole.empty else []) + layers
    with figure_style():
        fig = new_figure(6.4, 1.4 + 2.2 * len(panels))
        axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        for ax, panel in zip(axes, panels):
            if panel == "whole":
                _line(ax, whole, "black", "whole model")
                ax.set_ylabel("LLC (whole model)")
            else:
                for head, rows in heads[heads["layer"] == panel].groupby("head"):
                    role = _role(roles, panel, int(head))
                    _line(ax, rows.sort_values("step"), palette[int(head)], f"L{panel}H{head}" + (f" ({role})" if role else ""))
                    onset = (onsets or {}).get(f"L{panel}H{head}")
                    if onset is not None:
                        ax.axvline(onset, color=palette[int(head)], ls=":", lw=1.2)
                ax.set_ylabel(f"rLLC, layer {panel}")
                ax.legend(fontsize="x-small", ncol=2, loc="upper left")
            ax.axhline(0, color="0.6", lw=0.5)
            if loss_drop_step is not None:
                ax.axvline(loss_drop_step, color="black", ls="--", lw=0.8)
            if log_x:
                ax.set_xscale("log")
        axes[-1].set_xlabel("step" + (" (log)" if log_x else ""))
        steps = sorted(int(s) for s in estimates["step"].unique())
        axes[-1].set_xticks(steps, [str(s) for s in steps], rotation=45 if len(steps) > 6 else 0, fontsize="x-small")
        axes[-1].minorticks_off()
        notes = ["+- spread over chains; hollow: chains not flat (needs longer chains)"]
        if onsets:
            notes.append("dotted: a head's induction onset")
        if loss_drop_step is not None:
            notes.append("dashed: probe-loss drop")
        fig.suptitle("local learning coefficient (devinterp SGLD)\n" + "; ".join(notes), fontsize="small")
    return save_figure(fig, path)


def _line(ax, rows: pd.DataFrame, colour, label: str) -> None:
    ax.errorbar(rows["step"], rows["value"], yerr=rows["std"].fillna(0), color=colour, lw=1.2, capsize=2, label=label)
    flat = rows["flat"].astype(bool)
    ax.scatter(rows.loc[flat, "step"], rows.loc[flat, "value"], color=colour, s=14, zorder=3)
    ax.scatter(rows.loc[~flat, "step"], rows.loc[~flat, "value"], facecolors="white", edgecolors=colour, s=18, zorder=3)


def _role(roles: Sequence[Sequence[str]] | None, layer: int, head: int) -> str | None:
    try:
        return str(roles[layer][head]) if roles is not None else None
    except (IndexError, TypeError):
        return None
