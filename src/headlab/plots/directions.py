"""C1's figure: how the angles between random directions (and between freshly initialised heads'
queries) spread around 90 degrees, with the article's 83-97 degree band shaded."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from headlab.plots._figure import figure_style, new_figure, save_figure


def plot_angle_histograms(angles: dict[str, np.ndarray], band: tuple[float, float], path: str | os.PathLike) -> Path:
    """One density histogram per measurement on shared bins, each labelled with its share inside `band`."""
    bins = np.linspace(60.0, 120.0, 61)
    with figure_style():
        fig = new_figure(6.0, 3.2)
        ax = fig.subplots()
        ax.axvspan(*band, color="0.9", label=f"{band[0]:.0f}-{band[1]:.0f} degrees")
        for name, values in angles.items():
            inside = float(np.mean((values >= band[0]) & (values <= band[1])))
            ax.hist(values, bins=bins, density=True, histtype="step", linewidth=1.5, label=f"{name}: {inside:.0%} in band")
        ax.set_xlabel("angle between two directions (degrees)")
        ax.set_ylabel("density")
        ax.legend(fontsize=7, loc="upper left")
    return save_figure(fig, path)
