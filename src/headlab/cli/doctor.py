"""`headlab-doctor RUN_DIR | SWEEP_DIR | key=value ...`: the article's closing advice as checks.

On a run (or every job of a sweep): one line per check (ok / WARN / FAIL / n/m = not measured)
with the numbers behind it and the override to try; `doctor.json` goes into each run directory
(and the sweep directory). On overrides (`headlab-doctor optim.lr=6e-3 optim.warmup_ratio=0`):
the checks that need only the config, before anything is trained; nothing is written.
Settings: `headlab.doctor.DoctorCommand` (`target=PATH` or `plan=[key=value,...]`; `--cfg job` prints them).
Exit codes: 0 no check failed, 1 at least one failed, 2 the path or an override is wrong.
"""

from __future__ import annotations

import sys
from dataclasses import fields
from pathlib import Path

from headlab.cli import positional_arg, quote
from headlab.config.app import compose_train, override_args, run_app
from headlab.doctor import DoctorCommand
from headlab.errors import DataError

PROG = "headlab-doctor"
# `--help`: this text, the keys with their defaults, then the doc named by `footer=`
HELP = """headlab-doctor RUN_DIR | SWEEP_DIR | key=value ...: the article's closing advice as checks.
On a run (or every job of a sweep): one line per check (ok / WARN / FAIL / n/m = not measured) and
doctor.json in each run directory. On headlab-train overrides: the checks that need only the config,
before anything is trained; nothing is written. Short forms: RUN_DIR = target=RUN_DIR; a command
line of headlab-train overrides only = plan=['key=value',...].
Exit 0: no check failed; 1: at least one failed; 2: the path or an override is wrong."""
OWN_KEYS = {f.name for f in fields(DoctorCommand)} | {"hydra"}


def main(argv: list[str] | None = None) -> int:
    args = short_forms(list(sys.argv[1:] if argv is None else argv))
    return run_app(PROG, "doctor", doctor, args, schema=DoctorCommand, header=HELP, footer="docs/reproduce.md")


def short_forms(args: list[str]) -> list[str]:
    """Overrides that are all headlab-train's (key=value, none of doctor's own keys, not a directory
    first) are `plan=[...]`, Hydra's flags (`--cfg job`) kept; a leading path is `target=PATH`."""
    overrides = override_args(args)
    keys = {o.partition("=")[0].lstrip("+~").split(".")[0] for o in overrides}
    if overrides and all("=" in o for o in overrides) and not keys & OWN_KEYS and not Path(overrides[0]).is_dir():
        flags = list(args)
        for override in overrides:
            flags.remove(override)
        return [f"plan=[{','.join(quote(o) for o in overrides)}]", *flags]
    return positional_arg(args, "target")


def doctor(cmd) -> int:
    if cmd.target is not None and not Path(cmd.target).is_dir():  # before the heavy imports
        raise DataError(cmd.target, "no such directory (expected a run directory, a sweep directory or key=value "
                                    "overrides)")
    from headlab.tasks.train_config import validate_config
    from headlab.doctor import FAIL, diagnose, format_diagnosis
    from headlab.doctor.plan import diagnose_plan

    if cmd.plan:  # composed and checked as headlab-train would (close keys, group options, grammar, ranges)
        cfg = compose_train(cmd.plan)
        validate_config(cfg)
        diagnoses = [diagnose_plan(cfg, cmd.plan)]
    else:
        diagnoses = diagnose(cmd.target)
    for d in diagnoses:
        print(format_diagnosis(d))
    if len(diagnoses) > 1:
        counts = {w: sum(d.worst == w for d in diagnoses) for w in ("ok", "warn", FAIL)}
        print(f"{len(diagnoses)} jobs: {counts['ok']} ok, {counts['warn']} warn, {counts[FAIL]} fail")
    return 1 if any(d.worst == FAIL for d in diagnoses) else 0


if __name__ == "__main__":
    sys.exit(main())
