"""`headlab-reproduce`: every claim of the founding article as a verdict, from the sweeps on disk.

    headlab-reproduce --run [--scale quick|full] [--dry-run] [--launcher L] [--lanes N] [--override K=V ...]
    headlab-reproduce [--scale quick|full] [--out reports/<date>] [--sweeps-root logs/sweeps] [--evidence NAME=DIR ...]
    headlab-reproduce --jobs [--scale quick|full]   # = --run --dry-run: print the commands, run nothing

`--run` first runs (resumably: `headlab.reproduce.runner`) every sweep and command the specs need
at `--scale` into fixed folders, `<sweeps root>/<sweep_name>/reproduce`, then writes the report
from those folders. Without `--run` it reads the specs (`conf/reproduce/cNN_*.yaml`, or
`--specs DIR`), finds each claim's evidence at `--scale` (the newest aggregated sweep of its
`sweep_name` under the sweeps root, or the folder given with `--evidence`; a command's run
directory under `<sweeps root>/../runs/reproduce/`), applies the rules written in the spec and
writes claims.csv, claims.md and index.html. A claim without evidence is reported "not measured"
with the reason, never skipped.
Exit codes: 0 the report was written (or the job list printed), 1 the report was written but a
step of --run failed (the report says which claims lack evidence), 2 a spec or argument is wrong.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
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
    parser.add_argument("--jobs", action="store_true", help="print the commands --run would run at --scale and exit")
    parser.add_argument("--run", action="store_true", help="run the sweeps and commands first (resumable), then report")
    parser.add_argument("--dry-run", action="store_true", help="with --run: print the commands, run nothing")
    parser.add_argument("--launcher", default=None,
                        help="Hydra launcher of the sweeps (default: joblib for quick, slurm for full; basic: one job at a time)")
    parser.add_argument("--lanes", type=int, default=2,
                        help="sweeps run side by side, each job with cores / lanes threads (default 2)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="appended to every sweep, e.g. trainer.accelerator=gpu or hydra.launcher.partition=gpu")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from headlab.errors import HeadlabError

    from headlab.run.info import default_log_dir

    root = args.sweeps_root or default_log_dir() / "sweeps"
    try:
        specs = _specs(args)
        explicit = _explicit(args.evidence)
        if args.jobs or args.run:
            runner, sweeps, runs = _runner(args, specs, root)
    except HeadlabError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    if args.jobs or (args.run and args.dry_run):
        return _print_plan(runner, sweeps, runs, specs)
    failed = False
    if args.run:
        from headlab.reproduce.runner import run_plan

        started = time.monotonic()
        explicit = {**run_plan(runner, sweeps, runs), **explicit}
        failed = any(r.status == "failed" for r in runner.results)
        print(f"{PROG}: ran the plan in {time.monotonic() - started:.0f} s" + ("; some steps failed" if failed else ""))
    from headlab.reproduce.evidence import evaluate_claim
    from headlab.reproduce.report import write_report

    results = [evaluate_claim(spec, root, explicit, args.scale) for spec in specs]
    out = args.out or Path("reports") / dt.date.today().isoformat()
    for path in write_report(results, out):
        print(f"wrote {path}")
    if args.run:
        print(f"wrote {_write_times(runner, out)}")
    for r in results:
        print(f"{r.spec.claim:>4}  {r.verdict:<13} {r.reason}")
    return 1 if failed else 0


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


def _runner(args, specs, root: Path):
    from headlab.errors import ConfigError
    from headlab.reproduce.evidence import run_root
    from headlab.reproduce.jobs import LAUNCHERS, run_jobs, sweep_jobs
    from headlab.reproduce.runner import Runner

    if args.lanes < 1:
        raise ConfigError("--lanes", args.lanes, "an integer >= 1")
    bad = [o for o in args.override if "=" not in o]
    if bad:
        raise ConfigError("--override", bad[0], "KEY=VALUE")
    runner = Runner(root, run_root(root), args.scale, args.launcher or LAUNCHERS[args.scale], args.lanes,
                    tuple(args.override), dry_run=args.jobs or args.dry_run)
    return runner, sweep_jobs(specs, args.scale), run_jobs(specs, args.scale)


def _print_plan(runner, sweeps, runs, specs) -> int:
    from headlab.reproduce.runner import run_plan

    run_plan(runner, sweeps, runs)
    computed = [s.claim for s in specs if s.evidence.kind == "computed"]
    pending = [s.claim for s in specs if s.not_measured]
    print(f"# {len(sweeps)} sweeps, {len(runs)} runs; computed without training: {', '.join(computed) or '-'}; "
          f"no evidence yet (not measured): {', '.join(pending) or '-'}")
    return 0


def _write_times(runner, out: Path) -> Path:
    """jobs_time.csv: what each step of --run did and how long it took (the per-claim cost of a scale)."""
    from dataclasses import asdict

    import pandas as pd

    from headlab.store import atomic_write_csv

    path = out / "jobs_time.csv"
    atomic_write_csv(path, pd.DataFrame([asdict(r) for r in runner.results]))
    return path


if __name__ == "__main__":
    sys.exit(main())
