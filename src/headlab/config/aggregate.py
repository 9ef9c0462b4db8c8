"""`headlab-aggregate`'s schema: which multirun folder, where its tables go, and whether to draw."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from omegaconf import MISSING


@dataclass
class AggregateCommand:
    """`headlab-aggregate sweep_dir=SWEEP [out=DIR] [figures=false]` (types are checked by OmegaConf: no ranges here)."""

    sweep_dir: str = MISSING  # a Hydra multirun folder (holds multirun.yaml and <job_num>/ dirs)
    out: Optional[str] = None  # output folder (null: SWEEP_DIR/aggregate)
    figures: bool = True  # false: write the tables only


SCHEMA = AggregateCommand  # stored as aggregate_schema (headlab.config.schemas)
