"""W&B dashboards for the head measurements: step-keyed per-head series, a map grid and a head table.

Used only when a `WandbLogger` is among the trainer's loggers; `wandb` (and matplotlib, for the
map grid) is imported only then. The per-head scalars themselves reach W&B like every logger,
through `logger.log_metrics` (keys `heads/{metric}/L{l}H{h}`, see `head_scalars`); this module
adds what only W&B shows:

- `define_metric("heads/*", step_metric="trainer/global_step")`: every head series is plotted
  against the optimiser step, also the media logged between training-loop log calls;
- at each measurement, `heads/attention_maps` (a `wandb.Image` of the layers x heads grid of mean
  maps, titled with the step and each head's role) and `heads/table` (a `wandb.Table`, one row per
  head: step, layer, head, role, every per-head metric; conditional roles `role@{token}` as names),
  so the dashboard's image and table panels step through training and show roles changing.
  Drawing the grid costs about 0.4 s per measurement for 2 x 4 heads and 2 s for 6 x 12 (2-core
  CPU), counted in the callback's `write` time.

Key layout `heads/{metric}/L{l}H{h}`: sorted by metric, then layer and head, in CSV columns,
TensorBoard tags and W&B panel names alike, so a metric's heads sit side by side. W&B puts a
panel section on each first key segment (`heads`); its workspace setting "group by all segments"
gives one section per metric (`heads/entropy`, `heads/prev_score@y`, ...).
"""

from __future__ import annotations

import io
from typing import Any

import lightning as L
import numpy as np
from lightning.pytorch.loggers import WandbLogger

from headlab.analysis import ROLES
from headlab.measure import Measurement

STEP_METRIC = "trainer/global_step"  # what Lightning's WandbLogger logs the step under
IMAGE_KEY, TABLE_KEY = "heads/attention_maps", "heads/table"


def head_scalars(result: Measurement) -> dict[str, float]:
    """`heads/{metric}/L{l}H{h}` for every per-head metric, `heads/mean_{js,corr}/L{l}` per layer.

    >>> m = Measurement(3, 0, [{"entropy": np.array([0.5, 1.0])}], [{"js": np.array([[0, .2], [.2, 0]]),
    ...     "corr": np.array([[1, .4], [.4, 1]])}], np.zeros((1, 2, 2, 2)), [["broad", "local"]])
    >>> head_scalars(m)
    {'heads/entropy/L0H0': 0.5, 'heads/entropy/L0H1': 1.0, 'heads/mean_js/L0': 0.2, 'heads/mean_corr/L0': 0.4}
    """
    scalars: dict[str, float] = {}
    for layer, (metrics, pairs) in enumerate(zip(result.head_metrics, result.head_pairs)):
        for name, values in metrics.items():
            for head, value in enumerate(values):
                scalars[f"heads/{name}/L{layer}H{head}"] = float(value)
        off_diagonal = ~np.eye(len(pairs["js"]), dtype=bool)
        if off_diagonal.any():
            scalars[f"heads/mean_js/L{layer}"] = float(pairs["js"][off_diagonal].mean())
            scalars[f"heads/mean_corr/L{layer}"] = float(pairs["corr"][off_diagonal].mean())
    return scalars


def wandb_loggers(trainer: L.Trainer) -> list[WandbLogger]:
    """The trainer's W&B loggers (none: nothing in this module runs, wandb stays unimported)."""
    return [logger for logger in trainer.loggers if isinstance(logger, WandbLogger)]


def define_head_panels(logger: WandbLogger) -> None:
    """Plot every `heads/*` series and medium against the optimiser step."""
    run = logger.experiment
    run.define_metric(STEP_METRIC)
    run.define_metric("heads/*", step_metric=STEP_METRIC)


def head_table_rows(result: Measurement) -> tuple[list[str], list[list[Any]]]:
    """Columns `step, layer, head, role, <every other per-head metric>` and one row per head."""
    names = [n for n in result.metric_names if n != "role"]
    columns = ["step", "layer", "head", "role", *names]
    rows = []
    for layer, metrics in enumerate(result.head_metrics):
        for head, role in enumerate(result.roles[layer]):
            values = [ROLES[int(metrics[n][head])] if n.startswith("role@") else float(metrics[n][head]) for n in names]
            rows.append([result.step, layer, head, role, *values])
    return columns, rows


def log_head_panels(logger: WandbLogger, result: Measurement) -> None:
    """Log the map grid (`wandb.Image`) and the head table (`wandb.Table`) of one measurement."""
    import wandb

    columns, rows = head_table_rows(result)
    logger.experiment.log({
        IMAGE_KEY: wandb.Image(_grid_image(result), caption=f"mean attention maps at step {result.step}"),
        TABLE_KEY: wandb.Table(columns=columns, data=rows),
        STEP_METRIC: result.step,
    })


def _grid_image(result: Measurement) -> Any:
    """The run figure's attention grid (rows = layers, columns = heads) as a PIL image."""
    from PIL import Image

    from headlab.plots._figure import figure_style  # matplotlib: only when a W&B panel is drawn
    from headlab.plots.attention_grid import build_attention_grid_figure

    fig = build_attention_grid_figure(result.mean_patterns, roles=result.roles, title=f"step {result.step}")
    buffer = io.BytesIO()
    try:
        with figure_style():
            fig.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    finally:
        fig.clear()
    buffer.seek(0)
    return Image.open(buffer)
