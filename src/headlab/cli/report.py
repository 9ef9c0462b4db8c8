"""`headlab-report RUN_DIR|SWEEP_DIR`: which head does what, one line per head in plain words.

The lines come from `headlab.report` (docs/report.md); nothing is written. Exit 2: not a run
directory nor a sweep folder, one line.
"""

from __future__ import annotations

import sys

from headlab.config.app import positional_arg, run_app
from headlab.report import ReportCommand

PROG = "headlab-report"


def main(argv: list[str] | None = None) -> int:
    args = positional_arg(sys.argv[1:] if argv is None else argv, "path")
    return run_app(PROG, "report", report, args, schema=ReportCommand)


def report(cmd) -> int:
    from headlab.report import run_report, sweep_report
    from headlab.store import RunDir, SweepDir, is_sweep_dir

    lines = sweep_report(SweepDir(cmd.path)) if is_sweep_dir(cmd.path) else run_report(RunDir(cmd.path))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
