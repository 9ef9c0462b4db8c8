"""Aggregate a Hydra multirun folder into tidy tables, per-config statistics over seeds, and figures.

`aggregate_sweep(SweepDir(path), out_dir)` is what `headlab-aggregate` runs; the pieces are usable
on their own: `discover_runs` (read every job, never crash on a bad one), `mean_ci` /
`steps_to_converge` (statistics over seeds), and the head-level tables of `headlab.sweep.heads`.
"""

from headlab.sweep.aggregate import AggregateCommand, AggregateResult, aggregate_sweep
from headlab.sweep.runs import Run, discover_runs, load_run
from headlab.stats import MeanCI, mean_ci
from headlab.sweep.stats import steps_to_converge

__all__ = [
    "AggregateCommand",
    "AggregateResult",
    "MeanCI",
    "Run",
    "aggregate_sweep",
    "discover_runs",
    "load_run",
    "mean_ci",
    "steps_to_converge",
]
