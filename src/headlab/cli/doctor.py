"""`headlab-doctor RUN_DIR | SWEEP_DIR | key=value ...`: the article's closing advice as checks.

On a run (or every job of a sweep): one line per check (ok / WARN / FAIL / n/m = not measured)
with the numbers behind it and the override to try; `doctor.json` goes into each run directory
(and the sweep directory). On overrides (`headlab-doctor optim.lr=6e-3 optim.warmup_ratio=0`):
the checks that need only the config, before anything is trained; nothing is written.
Exit codes: 0 no check failed, 1 at least one failed, 2 the path or an override is wrong.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PROG = "headlab-doctor"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("target", nargs="+", help="a run directory, a multirun folder, or config overrides key=value")
    args = parser.parse_args(argv)
    is_plan = all("=" in t for t in args.target) and not Path(args.target[0]).is_dir()
    if not is_plan and (len(args.target) > 1 or not Path(args.target[0]).is_dir()):  # before the heavy imports
        print(f"{PROG}: error: {' '.join(args.target)}: no such directory (expected a run directory, a sweep directory "
              "or key=value overrides)", file=sys.stderr)
        return 2
    from headlab.doctor import FAIL, diagnose, format_diagnosis
    from headlab.errors import HeadlabError

    try:
        diagnoses = [_plan(args.target)] if is_plan else diagnose(args.target[0])
    except HeadlabError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    for d in diagnoses:
        print(format_diagnosis(d))
    if len(diagnoses) > 1:
        counts = {w: sum(d.worst == w for d in diagnoses) for w in ("ok", "warn", FAIL)}
        print(f"{len(diagnoses)} jobs: {counts['ok']} ok, {counts['warn']} warn, {counts[FAIL]} fail")
    return 1 if any(d.worst == FAIL for d in diagnoses) else 0


def _plan(overrides: list[str]):
    """The diagnosis of the config `headlab-train overrides...` would run (validated first)."""
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from headlab.config.validate import validate_config
    from headlab.doctor.plan import CONFIG_KEYS, config_tables, plan_checks
    from headlab.doctor.report import Diagnosis
    from headlab.errors import ConfigError

    try:
        with initialize_config_module("headlab.conf", version_base="1.3"):
            cfg = compose("train", overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as err:
        raise ConfigError("overrides", " ".join(overrides), f"overrides that compose: {str(err).splitlines()[0]}") from err
    validate_config(cfg)
    values = {key: OmegaConf.select(cfg, key, throw_on_resolution_failure=False) for key in CONFIG_KEYS}
    return Diagnosis(Path("(config: " + " ".join(overrides) + ")"), plan_checks(config_tables(values)))


if __name__ == "__main__":
    sys.exit(main())
