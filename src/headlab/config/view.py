"""`headlab-view`'s schema: which run or sweep folder gets its page."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING


@dataclass
class ViewCommand:
    """`headlab-view PATH`: PATH is a run directory or a sweep folder (holds multirun.yaml); writes PATH/view.html."""

    path: str = MISSING  # a headlab run directory (head_metrics.parquet) or a Hydra multirun folder


SCHEMA = ViewCommand  # stored as view_schema (headlab.config.schemas)
