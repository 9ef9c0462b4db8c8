"""`headlab-aggregate SWEEP_DIR [out=DIR] [figures=false]`: a Hydra multirun folder -> tables and figures.

Prints every file written, the per-config tables (results, division of labour, and where the sweep
has them: steps to target, intervention effects, per-domain accuracy, duplicate heads), then every job
that was skipped and why (missing, still running, failed, diverged, unreadable): `headlab.sweep`.
Settings: `headlab.sweep.aggregate.AggregateCommand` (`--cfg job` prints them); `-m sweep_dir=a,b` aggregates several.
Exit codes: 0 when at least one run was aggregated, 1 when the folder holds jobs but none usable, 2
when SWEEP_DIR is not a multirun folder (or a setting is wrong).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from headlab.cli import positional_arg
from headlab.config.app import run_app
from headlab.errors import DataError
from headlab.store import SweepDir
from headlab.sweep.aggregate import AggregateCommand

PROG = "headlab-aggregate"
# `--help`: this text, the keys with their defaults, then the doc named by `footer=`
HELP = """headlab-aggregate SWEEP_DIR [out=DIR] [figures=false]: a Hydra multirun folder -> tables and figures.
Prints every file written, the per-config tables, then every job skipped and why. Short form:
SWEEP_DIR = sweep_dir=SWEEP_DIR.
Exit 0: at least one run aggregated; 1: jobs but none usable; 2: not a multirun folder."""


def main(argv: list[str] | None = None) -> int:
    args = positional_arg(sys.argv[1:] if argv is None else argv, "sweep_dir")
    return run_app(PROG, "aggregate", aggregate, args, schema=AggregateCommand, header=HELP, footer="docs/sweeps.md")


def aggregate(cmd) -> int:
    sweep, out = SweepDir(cmd.sweep_dir), None if cmd.out is None else Path(cmd.out)
    if not sweep.path.is_dir():  # before the heavy imports: a typo answers at once
        raise DataError(sweep.path, "no such directory (expected a Hydra multirun folder)")
    if "MPLCONFIGDIR" not in os.environ:  # matplotlib's cache under the output folder, never the home directory
        os.environ["MPLCONFIGDIR"] = str((out or sweep.aggregate_dir).resolve() / ".cache" / "matplotlib")
    from headlab.sweep import aggregate_sweep
    from headlab.sweep.terminal import aggregate_report
    from headlab.view import write_view

    result = aggregate_sweep(sweep, out, figures=cmd.figures)
    if cmd.figures and result.usable:  # the sweep's page (headlab-view) beside its figures
        result.written.append(write_view(sweep))
    for line in aggregate_report(result):
        print(line)
    if not result.usable:
        print(f"{PROG}: error: no usable run in {sweep.path}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
