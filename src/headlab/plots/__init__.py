"""Seaborn figures from a run's tidy tables (depends on store/, never on torch or Lightning).

Each `plot_*` writes one PNG atomically and returns its path; each `build_*_figure` returns
the `matplotlib.figure.Figure` unsaved, so its content can be inspected.
"""

from headlab.plots.attention_grid import build_attention_grid_figure, plot_attention_grid
from headlab.plots.run_figures import ATTENTION_MAPS, FIGURES_DIR, AttentionMaps, load_attention_maps, write_run_figures
from headlab.plots.similarity import build_head_similarity_figure, plot_head_similarity
from headlab.plots.trajectories import (
    build_metric_trajectories_figure,
    build_role_timeline_figure,
    plot_metric_trajectories,
    plot_role_timeline,
)

__all__ = [
    "ATTENTION_MAPS",
    "FIGURES_DIR",
    "AttentionMaps",
    "build_attention_grid_figure",
    "build_head_similarity_figure",
    "build_metric_trajectories_figure",
    "build_role_timeline_figure",
    "load_attention_maps",
    "plot_attention_grid",
    "plot_head_similarity",
    "plot_metric_trajectories",
    "plot_role_timeline",
    "write_run_figures",
]
