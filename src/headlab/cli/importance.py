"""`headlab-importance RUN_DIR [checkpoint=last|best|all] [importance.KEY=VALUE ...]`: which heads matter.

For each chosen checkpoint of a finished run: every head ablated alone, gradient importance (Michel
et al. 2019), a random control, keep-top-k and leave-one-layer-in curves, the heads' roles; written
into RUN_DIR (`headlab.run.importance`). RUN_DIR may be a sweep folder: every usable job is measured
before anything is written, then the sweep is aggregated. `-m run_dir=a,b` measures several runs.
Settings: `headlab.config.importance` (`--cfg job` prints them). Exit 2: a bad run dir, checkpoint
or setting, one line, nothing written.
"""

from __future__ import annotations

import sys
from pathlib import Path

from headlab.config.app import positional_args, run_app

PROG = "headlab-importance"


def main(argv: list[str] | None = None) -> int:
    args = positional_args(sys.argv[1:] if argv is None else argv, "run_dir", {"--checkpoint": "checkpoint"})
    return run_app(PROG, "importance", importance, args)


def importance(cmd) -> int:
    from headlab.run.importance import compute, compute_sweep, write_outputs
    from headlab.store import is_sweep_dir

    run_dir = Path(cmd.run_dir)
    if not is_sweep_dir(run_dir):
        for path in write_outputs(run_dir, compute(run_dir, cmd.checkpoint, cmd.importance)):
            print(f"wrote {path}")
        return 0
    runs, outcomes = compute_sweep(run_dir, cmd.checkpoint, cmd.importance)
    for run in runs:
        if not run.usable:
            print(f"skipped job {run.job} ({run.config}, seed {run.seed}): {run.status}: {run.reason}")
    for run, outcome in outcomes:
        for path in write_outputs(run.run_dir, outcome):
            print(f"wrote {path}")
    from headlab.sweep import aggregate_sweep

    result = aggregate_sweep(run_dir, figures=cmd.importance.figures)
    for path in result.written:
        print(f"wrote {path}")
    print(f"{PROG}: measured {len(outcomes)} of {len(runs)} jobs; aggregated into {result.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
