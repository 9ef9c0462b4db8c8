"""The head report of a run folder or of every job of a sweep folder: reads the tables, nothing else.

`run_report(RunDir)`: a header line (the run, its accuracy, whose queries the task roles read) and
`headlab.report.heads.report_lines` of its head_metrics, head_importance (when `headlab-importance`
ran), summary.json and the newest probe_patterns/ part. `sweep_report(SweepDir)`: the same for each job, a job without
a table named and skipped. Nothing is written. `ReportCommand` is `headlab-report`'s schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
from omegaconf import MISSING

from headlab.errors import DataError
from headlab.report.heads import report_lines
from headlab.store import RunDir, SweepDir
from headlab.store.probe_patterns import read_last_pattern_part


@dataclass
class ReportCommand:
    """`headlab-report PATH`: PATH is a run directory or a sweep folder (holds multirun.yaml); prints one line per head."""

    path: str = MISSING  # a headlab run directory (head_metrics.parquet) or a Hydra multirun folder


def run_report(run: RunDir, top: int | None = None) -> list[str]:
    """The header and one line per head (the `top` most important only, with a pointer to the rest);
    a folder without head_metrics.parquet is a `DataError`."""
    try:
        head_metrics = run.head_metrics()
    except FileNotFoundError:
        raise DataError(run.path, "no head_metrics.parquet: not a headlab run directory, or the run "
                                  "measured no head yet (a sweep folder holds multirun.yaml)") from None
    summary = _summary(run)
    lines = report_lines(head_metrics, _importance(run), summary, last_sentences(run))
    more = [f"  ... {len(lines) - top} more: headlab-report {run.path}"] if top is not None and len(lines) > top else []
    return [_header(run, summary, head_metrics), *("  " + line for line in lines[:top]), *more]


def sweep_report(sweep: SweepDir) -> list[str]:
    """Every job's `run_report`, in job order; a job with no table is one line saying so."""
    lines: list[str] = []
    for run in sweep.jobs():
        try:
            lines.extend(run_report(run))
        except DataError as err:
            lines.append(f"{run.path}: skipped ({err.problem.split(':')[0]})")
    if not lines:
        raise DataError(sweep.path, "no job folders (0/, 1/, ...): nothing to report")
    return lines


def _header(run: RunDir, summary: dict[str, Any], head_metrics: pd.DataFrame) -> str:
    n_heads = head_metrics[["layer", "head"]].drop_duplicates().shape[0]
    facts = [f"{n_heads} heads", f"last measured at step {int(head_metrics['step'].max())}"]
    if isinstance(summary.get("val_acc"), (int, float)):
        facts.append(f"val_acc {summary['val_acc']:.3f} (best checkpoint)")
    overrides = summary.get("overrides")
    if overrides:  # summary.json holds Hydra's override string ("a=1,b=2"); a list is joined the same way
        facts.append(overrides if isinstance(overrides, str) else ",".join(str(o) for o in overrides))
    return f"{run.path}: " + ", ".join(facts)


def _summary(run: RunDir) -> dict[str, Any]:
    """summary.json as a dict; {} when missing or unreadable (the report still has the tables)."""
    try:
        loaded = run.load_summary()
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def last_sentences(run: RunDir) -> dict[str, Any] | None:
    """The run's newest `probe_patterns/` part (the tokens a content head picks); None when it has none or
    it cannot be read (the report still has the tables)."""
    try:
        return read_last_pattern_part(run.probe_patterns_dir)
    except (OSError, ValueError):
        return None


def _importance(run: RunDir) -> pd.DataFrame | None:
    try:
        return run.head_importance()
    except FileNotFoundError:
        return None
