"""`headlab-report RUN_DIR|SWEEP_DIR`: which head does what, one line per head in plain words.

The lines come from `headlab.report` (docs/report.md); nothing is written. Exit 2: not a run
directory nor a sweep folder, one line.
"""

from __future__ import annotations

import sys

from headlab.cli import positional_arg
from headlab.config.app import run_app
from headlab.report import ReportCommand

PROG = "headlab-report"
# `--help`: this text, the keys with their defaults, then the doc named by `footer=`
HELP = """headlab-report RUN_DIR|SWEEP_DIR: prints which head does what, one line per head, most important first:
what it reads from the queries that feed the decision ([CLS] under cls pooling), its role (task-aware
and all-query), its rank by ablation (headlab-importance) or gradient importance, when its role settled.
A sweep (holds multirun.yaml): every job in turn. Writes nothing. Short form: PATH = path=PATH.
Exit 2: not a run or sweep folder."""


def main(argv: list[str] | None = None) -> int:
    args = positional_arg(sys.argv[1:] if argv is None else argv, "path")
    return run_app(PROG, "report", report, args, schema=ReportCommand, header=HELP, footer="docs/report.md")


def report(cmd) -> int:
    from headlab.report import run_report, sweep_report
    from headlab.store import RunDir, SweepDir, is_sweep_dir

    lines = sweep_report(SweepDir(cmd.path)) if is_sweep_dir(cmd.path) else run_report(RunDir(cmd.path))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
