"""A layers x heads grid of mean attention maps: the first look at what each head does."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from headlab.errors import DataError
from headlab.plots._figure import figure_style, new_figure, save_figure

# Token labels on the outer panels only while they stay legible.
_MAX_TOKEN_TICKS = 48


def plot_attention_grid(
    mean_patterns: np.ndarray,
    path: str | os.PathLike,
    roles: Sequence[Sequence[str]] | None = None,
    title: str | None = None,
    tokens: Sequence[str] | None = None,
) -> Path:
    """Write the grid of `mean_patterns: [layer, head, q, k]` to `path` (PNG, atomic)."""
    return save_figure(build_attention_grid_figure(mean_patterns, roles=roles, title=title, tokens=tokens), path)


def build_attention_grid_figure(
    mean_patterns: np.ndarray,
    roles: Sequence[Sequence[str]] | None = None,
    title: str | None = None,
    tokens: Sequence[str] | None = None,
) -> Figure:
    """One heat map per head (rows = queries, cols = keys) on one shared 0..max colour scale.

    A shared scale keeps a sharp head visibly sharper than a diffuse one; NaN (a position no
    probe sequence reached) is left blank rather than drawn as zero attention.
    `mean_patterns: [layer, head, q, k]`, `roles: [layer][head]` labels, `tokens: [q]`.
    """
    patterns = _checked_patterns(mean_patterns)
    n_layers, n_heads, n_pos, _ = patterns.shape
    labels = _checked_roles(roles, n_layers, n_heads)
    if tokens is not None and len(tokens) != n_pos:
        raise DataError("tokens", f"expected {n_pos} tokens (one per position), got {len(tokens)}")
    finite = patterns[np.isfinite(patterns)]
    vmax = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    cmap = sns.color_palette("viridis", as_cmap=True).with_extremes(bad="white")
    with figure_style():
        fig, axes, cax = _grid_layout(n_layers, n_heads, two_line_titles=labels is not None)
        for layer in range(n_layers):
            for head in range(n_heads):
                ax = axes[layer, head]
                image = ax.imshow(
                    np.ma.masked_invalid(patterns[layer, head]), cmap=cmap, vmin=0.0, vmax=vmax, interpolation="nearest"
                )
                name = f"L{layer}H{head}" + (f"\n{labels[layer][head]}" if labels else "")
                ax.set_title(name, fontsize=7 if n_heads > 8 else 9)
                _label_panel(ax, tokens, first_col=head == 0, last_row=layer == n_layers - 1)
        fig.colorbar(image, cax=cax, label="mean attention")
        if title:
            fig.suptitle(title, y=1 - 0.1 / fig.get_figheight(), va="top")
    return fig


def _grid_layout(n_layers: int, n_heads: int, two_line_titles: bool) -> tuple[Figure, np.ndarray, Axes]:
    """Panels placed by hand: constrained layout takes ~20 s on a 12 x 16 grid, this < 1 s.

    Sizes in inches: square panels of edge `panel` that shrink as heads grow, a title strip
    above each, one colourbar on the right.
    """
    panel = float(np.clip(14.0 / n_heads, 1.05, 2.2))
    title_h = 0.36 if two_line_titles else 0.22
    top_h, bottom_h, left_w, right_w = title_h + 0.4, 0.3, 0.5, 1.0
    width = left_w + n_heads * panel * 1.08 + right_w
    height = top_h + n_layers * (panel + title_h) + bottom_h
    fig = new_figure(width, height, layout=None)
    bottom, top = bottom_h / height, 1 - top_h / height
    grid = fig.add_gridspec(
        n_layers, n_heads, left=left_w / width, right=1 - right_w / width, bottom=bottom, top=top,
        wspace=0.08, hspace=title_h / panel,
    )
    cax = fig.add_axes((1 - 0.75 * right_w / width, bottom + 0.1 * (top - bottom), 0.15 / width, 0.8 * (top - bottom)))
    return fig, grid.subplots(squeeze=False), cax


def _checked_patterns(mean_patterns: np.ndarray) -> np.ndarray:
    patterns = np.asarray(mean_patterns, dtype=np.float64)
    if patterns.ndim != 4 or patterns.shape[2] != patterns.shape[3] or 0 in patterns.shape:
        raise DataError("mean_patterns", f"expected a non-empty [layer, head, q, k] array with q == k, got shape {patterns.shape}")
    return patterns


def _checked_roles(roles: Sequence[Sequence[str]] | None, n_layers: int, n_heads: int) -> list[list[str]] | None:
    if roles is None:
        return None
    try:
        labels = np.asarray(roles, dtype=str)
    except ValueError as exc:  # ragged nesting
        raise DataError("roles", f"expected [layer][head] labels, got a ragged sequence ({exc})") from None
    if labels.shape != (n_layers, n_heads):
        raise DataError("roles", f"expected shape [layer, head] = ({n_layers}, {n_heads}), got {labels.shape}")
    return labels.tolist()


def _label_panel(ax: Axes, tokens: Sequence[str] | None, first_col: bool, last_row: bool) -> None:
    """Ticks only on the outer panels: a 12 x 16 grid stays readable."""
    ax.set_xticks([])
    ax.set_yticks([])
    show_tokens = tokens is not None and len(tokens) <= _MAX_TOKEN_TICKS
    if first_col:
        ax.set_ylabel("query", fontsize=7)
        if show_tokens:
            ax.set_yticks(range(len(tokens)), [str(t) for t in tokens], fontsize=5)
    if last_row:
        ax.set_xlabel("key", fontsize=7)
        if show_tokens:
            ax.set_xticks(range(len(tokens)), [str(t) for t in tokens], fontsize=5, rotation=90)
