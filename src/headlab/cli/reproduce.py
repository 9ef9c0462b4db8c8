"""`headlab-reproduce`: every claim of the founding article as a verdict, from the sweeps on disk.

    headlab-reproduce run=true [scale=quick|cpu|full|suites] [dry_run=true] [launcher=L] [lanes=N] [override=[K=V,...]]
    headlab-reproduce [scale=quick|cpu|full|suites] [out=reports/<date>] [sweeps_root=logs/sweeps] [evidence.NAME=DIR ...]
    headlab-reproduce jobs=true [scale=quick|cpu|full|suites]   # = run=true dry_run=true: print the commands (and, cpu, the time estimate)

`scale=suites` reads public checkpoint suites instead (the specs' `evidence.suites`: `headlab-analyze-hf
suite=...` into `<sweeps root>/<sweep_name>/reproduce`, then headlab-aggregate); `use_suite=NAME|DIR` puts
another suite, e.g. a local tiny one, in place of each spec's.
`run=true` first runs (resumably: `headlab.reproduce.runner`) every sweep and command the specs need
at `scale` into fixed folders, `<sweeps root>/<sweep_name>/reproduce`, then writes the report
from those folders. Without `run=true` it reads the specs (`conf/reproduce/cNN_*.yaml`, or
`specs=DIR`), finds each claim's evidence at `scale` (the newest aggregated sweep of its
`sweep_name` under the sweeps root, or the folder given with `evidence.NAME=DIR`; a command's run
directory under `<sweeps root>/../runs/reproduce/`), applies the rules written in the spec and
writes claims.csv, claims.md and index.html. A claim without evidence is reported "not measured"
with the reason, never skipped. Keys: `headlab.reproduce.command.ReproduceCommand` (`--cfg job` prints them).
Exit codes: 0 the report was written (or the job list printed), 1 the report was written but a
step of run=true failed (the report says which claims lack evidence), 2 a spec or argument is wrong.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path

from headlab.config.app import run_app
from headlab.reproduce.command import reproduce_schema

PROG = "headlab-reproduce"
# `--help`: this text, the keys with their defaults, then the doc named by `footer=`
HELP = """headlab-reproduce: every claim of the founding article as a verdict, from the sweeps on disk.
    headlab-reproduce run=true [scale=quick|cpu|full|suites] [dry_run=true] [launcher=L] [lanes=N] ["override=['K=V',...]"]
    headlab-reproduce [scale=quick|cpu|full|suites] [out=reports/<date>] [sweeps_root=logs/sweeps] [evidence.NAME=DIR ...]
    headlab-reproduce jobs=true [scale=quick|cpu|full|suites]   # = run=true dry_run=true: print the commands, run nothing
    headlab-reproduce run=true scale=suites [use_suite=NAME|DIR]   # the claims with evidence.suites, on a checkpoint suite
only=[C1,C2] limits the report to those claims.
Exit 0: the report was written (or the job list printed); 1: written, but a step of run=true failed;
2: a spec or argument is wrong."""


def main(argv: list[str] | None = None) -> int:
    return run_app(PROG, "reproduce", reproduce, argv, schema=reproduce_schema(), header=HELP,
                   footer="docs/reproduce.md")


def reproduce(cmd) -> int:
    from headlab.reproduce.command import default_report_dir, plan_for, plan_summary, write_times
    from headlab.reproduce.evidence import evaluate_claim
    from headlab.reproduce.looks import deferred_second_look, run_second_look, second_look_specs, with_second_look
    from headlab.reproduce.multiplicity import control
    from headlab.reproduce.report import write_report
    from headlab.reproduce.runner import run_plan

    plan = plan_for(cmd)  # every setting checked before anything runs
    if cmd.jobs or (cmd.run and cmd.dry_run):
        run_plan(plan.runner, plan.sweeps, plan.runs)
        if cmd.scale == "cpu":
            run_second_look(plan.runner, plan.specs)
        print(plan_summary(plan))
        return 0
    explicit, failed = plan.explicit, False
    if cmd.run:
        started = time.monotonic()
        early = deferred_second_look(plan.specs, plan.sweeps_root, explicit) if cmd.scale == "cpu" else []
        explicit = {**run_plan(plan.runner, plan.sweeps, plan.runs, early), **explicit}
        failed = any(r.status == "failed" for r in plan.runner.results)
        print(f"{PROG}: ran the plan in {time.monotonic() - started:.0f} s" + ("; some steps failed" if failed else ""))
    results = control([evaluate_claim(spec, plan.sweeps_root, explicit, cmd.scale, cmd.use_suite) for spec in plan.specs])
    if cmd.scale == "cpu":  # the second look: fresh seeds for what look 1 left inconclusive
        missing = [s for s in second_look_specs(results) if s.evidence.replication.sweep_name not in explicit]
        if cmd.run and missing:  # a look 2 the early start left out (it looked decided): run it now
            explicit = {**run_second_look(plan.runner, missing), **explicit}
            failed = any(r.status == "failed" for r in plan.runner.results)
        results = with_second_look(results, plan.sweeps_root, explicit)
    out = Path(cmd.out) if cmd.out else default_report_dir(dt.date.today().isoformat(), cmd.only, plan.specs)
    for path in write_report(results, out, scale=cmd.scale):
        print(f"wrote {path}")
    if cmd.run:
        print(f"wrote {write_times(plan.runner, out)}")
    for r in results:
        print(f"{r.spec.claim:>4}  {r.verdict:<13} {r.reason}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
