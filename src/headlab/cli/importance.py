"""`headlab-importance RUN_DIR [checkpoint=last|best|all] [importance.KEY=VALUE ...]`: which heads matter.

For each chosen checkpoint of a finished run: every head ablated alone, gradient importance (Michel
et al. 2019), a random control, keep-top-k and leave-one-layer-in curves, the heads' roles; written
into RUN_DIR (`headlab.tasks.importance`). RUN_DIR may be a sweep folder: every usable job is measured
before anything is written, then the sweep is aggregated. `-m run_dir=a,b` measures several runs.
Settings: `headlab.tasks.importance.ImportanceCommand` (`--cfg job` prints them). Exit 2: a bad run dir, checkpoint
or setting, one line, nothing written.
"""

from __future__ import annotations

import sys

from headlab.cli import positional_arg
from headlab.config.app import run_app
from headlab.tasks.importance import ImportanceCommand

PROG = "headlab-importance"
# `--help`: this text, the keys with their defaults, then the doc named by `footer=`
HELP = """headlab-importance RUN_DIR [checkpoint=last|best|all] [importance.KEY=VALUE ...]: which heads matter.
Every head of a finished run ablated alone, gradient importance, a random control, keep-top-k curves;
written into RUN_DIR (head_importance.parquet, importance.json, figures/). RUN_DIR may be a sweep folder."""
TOP_HEADS = 3  # heads described at the end of a run's importance (headlab-report prints every head)


def main(argv: list[str] | None = None) -> int:
    args = positional_arg(sys.argv[1:] if argv is None else argv, "run_dir")
    return run_app(PROG, "importance", importance, args, schema=ImportanceCommand, header=HELP,
                   footer="docs/importance.md")


def importance(cmd) -> int:
    from headlab.report import run_report
    from headlab.tasks.importance import compute, compute_sweep, write_outputs
    from headlab.store import RunDir, SweepDir, is_sweep_dir

    if not is_sweep_dir(cmd.run_dir):
        run = RunDir(cmd.run_dir)
        for path in write_outputs(run, compute(run, cmd.checkpoint, cmd.importance)):
            print(f"wrote {path}")
        print("\n".join(run_report(run, top=TOP_HEADS)))  # what it found: the most important heads in words
        return 0
    sweep = SweepDir(cmd.run_dir)
    runs, outcomes = compute_sweep(sweep, cmd.checkpoint, cmd.importance)
    for run in runs:
        if not run.usable:
            print(f"skipped job {run.job} ({run.config}, seed {run.seed}): {run.status}: {run.reason}")
    for run, outcome in outcomes:
        for path in write_outputs(run.files, outcome):
            print(f"wrote {path}")
    from headlab.sweep import aggregate_sweep
    from headlab.view import write_view

    result = aggregate_sweep(sweep, figures=cmd.importance.figures)
    if cmd.importance.figures and result.usable:  # the sweep's page (headlab-view) beside its figures
        result.written.append(write_view(sweep))
    for path in result.written:
        print(f"wrote {path}")
    print(f"{PROG}: measured {len(outcomes)} of {len(runs)} jobs; aggregated into {result.out_dir}; "
          f"each job's heads in words: headlab-report {sweep.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
