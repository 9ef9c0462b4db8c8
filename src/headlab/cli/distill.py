"""`headlab-distill teacher=RUN_DIR [distill.KEY=VALUE ...] [headlab-train overrides]`: train a distilled student.

The same command as `headlab-train +distill=default` (conf/distill/default.yaml; `distill=NAME`
picks a variant of conf/distill/ instead, e.g. `distill=logits`): the student is an
ordinary headlab run (run dir contract, head metrics, summary.json, sweeps with -m, resume), whose
module (`headlab.distill.DistillModule`) adds the teacher's logit and attention terms to the loss.
Exit codes are headlab-train's (2: a config mistake, one line, nothing written). docs/distill.md.
"""

from __future__ import annotations

import sys

SELECT = "+distill=default"


def main() -> None:
    args = sys.argv[1:]
    if not any(a.startswith("+distill=") for a in args):
        sys.argv[1:] = with_selection(args)
    from headlab.cli.train import main as train_main

    train_main(prog="headlab-distill")


def with_selection(args: list[str]) -> list[str]:
    """`SELECT` just before the first override, after the flags (Hydra's parser wants the overrides
    in one run). A `distill=NAME` override (conf/distill/NAME.yaml, e.g. a sweep=distill variant)
    replaces the selection, wherever it stands."""
    first = next((i for i, a in enumerate(args) if "=" in a and not a.startswith("-")), len(args))
    return [*args[:first], SELECT, *args[first:]]


if __name__ == "__main__":
    main()
