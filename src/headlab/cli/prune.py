"""`headlab-prune RUN_DIR [prune.KEY=VALUE ...]`: remove a run's least important heads round by round.

Each round removes `prune.fraction_per_step` of the remaining heads (lowest first by
`prune.ranking`), optionally fine-tunes, re-ranks, and stops before validation accuracy falls more
than `prune.max_drop` below the unpruned network's (on the whole validation split, or with
`prune.selection=val_half` on its half A, half B and test held out); with `prune.speedup` the pruned
network is timed against the unpruned one (`headlab.tasks.pruning`). Writes `prune_curve.parquet`,
`prune.json`, `pruned/<label>.ckpt` (`<ranking>[-valhalf]-ft<N>`) and `figures/prune_curve.png`
into RUN_DIR. `-m run_dir=a,b` prunes several runs. Settings: `headlab.tasks.pruning.PruneCommand` (`--cfg job` prints them). Exit 2: a bad run dir,
checkpoint or setting, one line, nothing written.
"""

from __future__ import annotations

import sys

from headlab.cli import positional_arg
from headlab.config.app import run_app
from headlab.tasks.pruning import PruneCommand

PROG = "headlab-prune"
# `--help`: this text, the keys with their defaults, then the doc named by `footer=`
HELP = """headlab-prune RUN_DIR [prune.KEY=VALUE ...]: remove a run's least important heads round by round,
stopping before val accuracy falls more than prune.max_drop (prune.selection=val_half: on half A of
val, half B and test held out); the pruned network is timed against the unpruned one. Writes prune_curve.parquet, prune.json, pruned/, figures/ into RUN_DIR."""


def main(argv: list[str] | None = None) -> int:
    args = positional_arg(sys.argv[1:] if argv is None else argv, "run_dir")
    return run_app(PROG, "prune", prune, args, schema=PruneCommand, header=HELP,
                   footer="docs/importance.md#headlab-prune")


def prune(cmd) -> int:
    from headlab.tasks.pruning import compute, summary_lines, write_outputs
    from headlab.store import RunDir

    run = RunDir(cmd.run_dir)
    outcome = compute(run, cmd.prune)
    for path in write_outputs(run, outcome):
        print(f"wrote {path}")
    for line in summary_lines(outcome):
        print(f"{PROG}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
