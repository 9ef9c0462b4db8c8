"""Shared figure plumbing: a scoped style, and an atomic save.

Figures are plain `matplotlib.figure.Figure` objects, never registered with pyplot: nothing
needs a display, nothing accumulates in pyplot's figure list between (reused) joblib workers,
and the process-wide backend is left alone (switching it would break a notebook user's).
`savefig` renders PNGs with the Agg canvas regardless of the current backend.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from pathlib import Path
from typing import Hashable, Iterator, Sequence

import matplotlib as mpl
import seaborn as sns
from matplotlib import font_manager
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from headlab.store import atomic_write_with

DPI = 120

# Fonts that carry Chinese glyphs (character-level zh_reviews tokens); used only if installed.
_CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "WenQuanYi Zen Hei", "SimHei", "Microsoft YaHei")


@contextlib.contextmanager
def figure_style() -> Iterator[None]:
    """Seaborn look for the duration of the block; rcParams are restored on exit."""
    installed = {f.name for f in font_manager.fontManager.ttflist}
    cjk = [name for name in _CJK_FONTS if name in installed]
    with sns.axes_style("ticks"), sns.plotting_context("paper"):
        with mpl.rc_context({"font.sans-serif": [*mpl.rcParams["font.sans-serif"][:1], *cjk]} if cjk else {}):
            yield


def new_figure(width: float, height: float, layout: str | None = "constrained") -> Figure:
    """A figure outside pyplot's registry (see module docstring); constrained layout by default."""
    return Figure(figsize=(width, height), layout=layout)


def save_figure(fig: Figure, path: str | os.PathLike, dpi: int = DPI) -> Path:
    """Write `fig` atomically (never a half-written PNG), then release its artists."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "png"
    try:
        with figure_style(), warnings.catch_warnings():
            # Without a CJK font each Chinese token would warn once per glyph; its box says enough.
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
            atomic_write_with(path, lambda tmp: fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format=fmt))
    finally:
        fig.clear()
    return path


def categorical_palette(levels: Sequence[Hashable]) -> dict:
    """One distinct colour per level (tab10 up to 10 levels, evenly spaced hues beyond)."""
    colours = sns.color_palette("tab10" if len(levels) <= 10 else "husl", len(levels))
    return dict(zip(levels, colours))


def metric_by_layer_axes(fig: Figure, metrics: Sequence[str], layers: Sequence[int]) -> Iterator[tuple[Axes, str, int, bool]]:
    """The cells of a rows = metric, cols = layer grid with shared axes, titled "L{layer}" on top
    and "training step" at the bottom; yields (ax, metric, layer, is_first_column)."""
    axes = fig.subplots(len(metrics), len(layers), squeeze=False, sharex=True, sharey="row")
    for i, metric in enumerate(metrics):
        for j, layer in enumerate(layers):
            ax = axes[i, j]
            ax.set_title(f"L{layer}" if i == 0 else "")
            ax.set_xlabel("training step" if i == len(metrics) - 1 else "")
            yield ax, metric, layer, j == 0
