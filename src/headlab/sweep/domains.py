"""Sweep table domain_accuracy.csv: per config and domain, test accuracy with a 95% CI (written by headlab-aggregate)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from headlab.sweep.runs import Run


def write_domain_accuracy(out_dir: Path, runs_by_config: dict[str, list[Run]], tags: pd.DataFrame) -> list[Path]:
    """The files written into `out_dir` (none when no run of the sweep carries what the table reads)."""
    return []
