"""`headlab-llc RUN_DIR [llc.KEY=VALUE ...]`: the local learning coefficient, whole model and per head.

At up to `llc.checkpoints` of the run's saved checkpoints (log-spaced in step; `llc.steps` names them),
devinterp's SGLD estimates the whole model's LLC and each head's refined LLC (only that head's
W_Q/W_K/W_V/W_O sampled), for an LM run (experiment=induction) or a classifier run; written into RUN_DIR
(`headlab.tasks.llc`): head_metrics.parquet rows `rllc`, llc.parquet, llc.json, figures/llc.png.
Settings and their calibration: `headlab.tasks.llc.LLCCommand` (`--cfg job` prints them). Exit 2: not a run dir, a
run without checkpoints, a bad setting: one line, nothing written.
"""

from __future__ import annotations

import sys

from headlab.cli import positional_arg
from headlab.config.app import run_app
from headlab.tasks.llc import LLCCommand

PROG = "headlab-llc"
# `--help`: this text, the keys with their defaults, then the doc named by `footer=`
HELP = """headlab-llc RUN_DIR [llc.KEY=VALUE ...]: how degenerate the loss basin is, whole model and per head.
At up to llc.checkpoints of the run's saved checkpoints (log-spaced in step), SGLD (devinterp) estimates
the whole model's LLC and each head's refined LLC (only that head's W_Q/W_K/W_V/W_O sampled); written into
RUN_DIR (head_metrics.parquet rows llc / rllc, llc.parquet, llc.json, figures/llc.png). Exit 2: not a run
dir, no checkpoints, a bad setting, one line, nothing written."""


def main(argv: list[str] | None = None) -> int:
    args = positional_arg(sys.argv[1:] if argv is None else argv, "run_dir")
    return run_app(PROG, "llc", llc, args, schema=LLCCommand, header=HELP, footer="docs/language_models.md")


def llc(cmd) -> int:
    from headlab.store import RunDir
    from headlab.tasks.llc import compute, plan, write_outputs
    from headlab.tasks.lock import RunLock

    run = RunDir(cmd.run_dir)
    chosen = plan(run, cmd.llc)
    print(f"{PROG}: {chosen.note}", flush=True)
    with RunLock(run, key="run_dir"):  # no training or other tool writes the run dir meanwhile
        outcome = compute(chosen, cmd.llc, progress=lambda line: print(f"{PROG}: {line}", flush=True))
        for path in write_outputs(run, outcome):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
