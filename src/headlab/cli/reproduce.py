"""`headlab-reproduce`: every claim of the founding article as a verdict, from the sweeps on disk.

    headlab-reproduce [--scale quick|full] [--out reports/<date>] [--sweeps-root logs/sweeps] [--evidence NAME=DIR ...]
    headlab-reproduce --jobs [--scale quick|full]   # dry run: print the sweeps the specs need, run nothing

Reads the claim specs (`conf/reproduce/cNN_*.yaml`, or `--specs DIR`), finds each claim's evidence
at `--scale` (the newest aggregated sweep of its `sweep_name` under the sweeps root, or the folder
given with `--evidence`; a command's run directory under `<sweeps root>/../runs/reproduce/`),
applies the rules written in the spec and writes claims.csv, claims.md and index.html. A claim
without evidence is reported "not measured" with the reason, never skipped.
Exit codes: 0 the report was written (or the job list printed), 2 a spec or argument is wrong.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from pathlib import Path

PROG = "headlab-reproduce"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--specs", type=Path, default=None, help="folder of claim specs (default: the shipped conf/reproduce)")
    parser.add_argument("--sweeps-root", type=Path, default=None,
                        help="where sweeps live (default: $HEADLAB_LOG_DIR/sweeps, else logs/sweeps)")
    parser.add_argument("--evidence", action="append", default=[], metavar="SWEEP_NAME=DIR",
                        help="use this sweep folder for SWEEP_NAME (repeatable)")
    parser.add_argument("--out", type=Path, default=None, help="report folder (default: reports/<today>)")
    parser.add_argument("--only", default="", help="comma-separated claim ids (default: all)")
    parser.add_argument("--scale", choices=("quick", "full"), default="quick",
                        help="quick: CPU scale (make reproduce-quick); full: the article's scale (default: quick)")
    parser.add_argument("--jobs", action="store_true", help="print the sweeps to run at --scale and exit")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from headlab.errors import HeadlabError

    try:
        specs = _specs(args)
        if args.jobs:
            return _print_jobs(specs, args.scale)
        explicit = _explicit(args.evidence)
    except HeadlabError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    from headlab.reproduce.evidence import evaluate_claim
    from headlab.reproduce.report import write_report

    root = args.sweeps_root or Path(os.environ.get("HEADLAB_LOG_DIR", "logs")) / "sweeps"
    results = [evaluate_claim(spec, root, explicit, args.scale) for spec in specs]
    out = args.out or Path("reports") / dt.date.today().isoformat()
    for path in write_report(results, out):
        print(f"wrote {path}")
    for r in results:
        print(f"{r.spec.claim:>4}  {r.verdict:<13} {r.reason}")
    return 0


def _specs(args):
    from importlib.resources import files

    from headlab.errors import ConfigError
    from headlab.reproduce.spec import load_specs

    folder = args.specs or Path(str(files("headlab.conf").joinpath("reproduce")))
    specs = load_specs(folder)
    if args.only:
        wanted = [c.strip().upper() for c in args.only.split(",") if c.strip()]
        unknown = sorted(set(wanted) - {s.claim for s in specs})
        if unknown:
            raise ConfigError("--only", args.only, f"claim ids among {', '.join(s.claim for s in specs)}")
        specs = [s for s in specs if s.claim in wanted]
    return specs


def _explicit(pairs: list[str]) -> dict[str, Path]:
    from headlab.errors import ConfigError

    out = {}
    for pair in pairs:
        name, sep, folder = pair.partition("=")
        if not sep or not name or not Path(folder).is_dir():
            raise ConfigError("--evidence", pair, "SWEEP_NAME=DIR with an existing sweep (or aggregate) folder")
        out[name] = Path(folder)
    return out


def _print_jobs(specs, scale: str) -> int:
    from headlab.reproduce.jobs import run_jobs, sweep_jobs

    jobs, runs = sweep_jobs(specs, scale), run_jobs(specs, scale)
    for job in jobs:
        print(f"{job.command()}    # {job.sweep_name}: {', '.join(job.claims)}")
    for run in runs:
        print(f"{run.command()}    # {run.run_name}: {', '.join(run.claims)}")
    computed = [s.claim for s in specs if "computed" in s.evidence]
    pending = [s.claim for s in specs if s.not_measured]
    print(f"# {len(jobs)} sweeps, {len(runs)} runs; computed without training: {', '.join(computed) or '-'}; "
          f"no evidence yet (not measured): {', '.join(pending) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
