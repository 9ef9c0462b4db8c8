"""`headlab-report`'s schema: which run or sweep folder is described."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING


@dataclass
class ReportCommand:
    """`headlab-report PATH`: PATH is a run directory or a sweep folder (holds multirun.yaml); prints one line per head."""

    path: str = MISSING  # a headlab run directory (head_metrics.parquet) or a Hydra multirun folder


SCHEMA = ReportCommand  # stored as report_schema (headlab.config.schemas)
