"""Run what the claim specs need at one scale, resumably, then leave the report to `headlab-reproduce`.

The plan is every sweep of `jobs.sweep_jobs` and every run of `jobs.run_jobs`, worked off by
`lanes` workers side by side (each sweep runs its jobs one at a time with cores / lanes torch
threads, so the cores stay busy through a sweep's start-up, its last odd job and its aggregation;
a sweep whose teacher is a job of another sweep waits for that sweep). Each sweep goes into a fixed folder, `<sweeps root>/<sweep_name>/reproduce`, as a
Hydra multirun with `resume=auto`: a job that completed with the same settings is skipped by
headlab-train itself, an interrupted one continues from its last checkpoint, so calling the runner
again after a kill (or after it finished) redoes only what is missing. After the multirun the
sweep's `per_job` commands (headlab-prune, headlab-importance) run on each completed job that
matches their selection, each once (`reproduce_steps.json` in the job dir records what finished),
and `headlab-aggregate` writes the tables the report reads. A step that fails is reported and the
runner goes on: the report says which claims lack evidence.

A dry run prints the same commands and runs nothing (that is how `make reproduce` is exercised on
a machine without the cluster the full scale asks for).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from headlab.reproduce.freeze import FREEZE_FILE, record_start, run_freeze_file
from headlab.reproduce.jobs import RunJob, SuiteJob, SweepJob, lane_order
from headlab.reproduce.spec import PER_JOB_COMMANDS, PerJob
from headlab.reproduce.statistics import same_value
from headlab.store import RunDir
from headlab.store.run_dir import REPRODUCE_STEPS as STEPS_FILE  # its name here before RunDir owned it
from headlab.store.run_dir import SUMMARY

# What every sweep of a scale gets unless its overrides (or override=[...]) set the key: the per-run
# figures (of the classifier's and the LM's measuring callbacks alike) cost seconds per job and the
# report reads the aggregate's figures only.
SCALE_DEFAULTS = {"quick": ("figures=false",), "cpu": ("figures=false",), "full": (), "suites": ("figures=false",)}
FOLDER = "reproduce"            # <sweeps root>/<sweep_name>/reproduce: the runner's own, fixed sweep folder
LOGS = "reproduce-logs"


@dataclass
class StepResult:
    """One line of the runner's time table (`jobs_time.csv` beside the report)."""

    step: str
    claims: str
    status: str                 # done, skipped (nothing left to do), failed, planned (dry run)
    wall_s: float = 0.0
    detail: str = ""


@dataclass
class Runner:
    """Runs (or prints) the plan; `bin_dir` holds the console scripts (the venv's bin)."""

    sweeps_root: Path
    run_root: Path
    scale: str
    launcher: str
    lanes: int = 2                       # sweeps (and per-job commands) side by side
    extra: tuple[str, ...] = ()          # appended to every sweep (e.g. trainer.accelerator=gpu)
    dry_run: bool = False
    bin_dir: Path = field(default_factory=lambda: Path(sys.executable).parent)
    say: Callable[[str], None] = lambda line: print(line, flush=True)  # noqa: E731 - progress shows at once in a log
    results: list[StepResult] = field(default_factory=list)
    # claim -> what each start records of its spec (reproduce.freeze.freeze_entries); empty: nothing recorded
    freeze: Mapping[str, dict[str, Any]] = field(default_factory=dict)

    # ---- sweeps -------------------------------------------------------------------------------

    def folder(self, job: SweepJob | SuiteJob) -> Path:
        return self.sweeps_root / job.sweep_name / FOLDER

    def threads(self) -> int:
        from headlab.tasks.threads import available_cores

        return max(1, available_cores() // max(1, self.lanes))

    def launcher_args(self) -> list[str]:
        """A local launcher runs one job at a time per lane with the lane's share of the cores; a
        cluster launcher (slurm) sizes its jobs itself."""
        args = [f"hydra/launcher={self.launcher}"]
        if self.launcher == "joblib":
            args += ["hydra.launcher.n_jobs=1", f"threads={self.threads()}"]
        elif self.launcher == "basic":
            args.append(f"threads={self.threads()}")
        return args

    def sweep_argv(self, job: SweepJob, teacher_dir: str | None) -> list[str]:
        """The multirun: the spec's grid into the fixed folder, resumable, teachers resolved."""
        argv = [str(self.bin_dir / job.program), "-m", f"sweep={job.sweep}", *self.launcher_args(),
                f"hydra.sweep.dir={self.folder(job)}", "resume=auto", *job.overrides, f"sweep_name={job.sweep_name}"]
        if teacher_dir is not None:
            argv.append(f"teacher={teacher_dir}")
        given = {a.split("=", 1)[0].lstrip("+~") for a in (*argv, *self.extra)}
        defaults = [d for d in SCALE_DEFAULTS[self.scale] if d.split("=", 1)[0] not in given]
        return argv + defaults + list(self.extra)

    def run_sweep(self, job: SweepJob) -> None:
        started = time.monotonic()
        label = f"sweep {job.sweep_name}"
        teacher_dir = None
        if job.teacher:
            teacher_dir = self._teacher(job)
            if teacher_dir is None:
                self._record(label, job.claims, "failed", started,
                             f"no completed teacher job in {job.teacher[0]} with {_where_text(job.teacher[1])}")
                return
        folder = self.folder(job)
        argv = self.sweep_argv(job, teacher_dir)
        if self.dry_run:
            self.say(f"# {job.sweep_name}: {', '.join(job.claims)}")
            self.say(_shell(argv))
            for step in job.per_job:
                which = f" with {_where_text(step.where)}" if step.where else ""
                self.say(f"  then on each completed job{which}: "
                         f"{_shell([step.command, 'JOB_DIR', *step.args])}")
            self.say(f"  then: {_shell([str(self.bin_dir / 'headlab-aggregate'), str(folder)])}")
            self._record(label, job.claims, "planned", started)
            return
        self._record_freeze(folder / FREEZE_FILE, job.claims)
        before = _completed_jobs(folder)
        multirun_ok = self._call(argv, folder / LOGS / "multirun.log")
        after = _completed_jobs(folder)
        ran = len(after) - len(before)
        post_ran, post_failed = self._per_job(job, after)
        aggregate = folder / "aggregate" / "sweep_runs.csv"
        aggregated = True
        if ran or post_ran or not aggregate.is_file():
            aggregated = self._call([str(self.bin_dir / "headlab-aggregate"), str(folder)], folder / LOGS / "aggregate.log")
        status = "done" if (ran or post_ran) else "skipped"
        problems = [p for p, bad in (("some jobs failed", not multirun_ok), (f"{post_failed} per-job commands failed", post_failed),
                                     ("aggregation failed", not aggregated)) if bad]
        self._record(label, job.claims, "failed" if problems else status, started,
                     f"{len(after)} jobs completed ({ran} now), {post_ran} per-job commands now"
                     + (f"; {'; '.join(problems)} (logs: {folder / LOGS})" if problems else ""))

    def _teacher(self, job: SweepJob) -> str | None:
        name, where = job.teacher
        if self.dry_run:
            return f"<the job of {name} with {_where_text(where)}>"
        matches = [d for d in _completed_jobs(self.sweeps_root / name / FOLDER) if _matches(d, where)]
        return str(matches[0].resolve()) if len(matches) == 1 else None  # absolute: a cluster job may start elsewhere

    def _per_job(self, job: SweepJob, completed: list[Path]) -> tuple[int, int]:
        """Run each per-job command once on each matching completed job (in this lane, one at a time)."""
        todo = [(d, step) for step in job.per_job for d in completed
                if _matches(d, step.where) and _key(step) not in _done_steps(d)]
        outcomes = []
        for d, step in todo:
            argv = [str(self.bin_dir / step.command), str(d), *step.args,
                    f"{PER_JOB_COMMANDS[step.command]}.threads={self.threads()}"]
            ok = self._call(argv, d / f"{step.command}.log")
            if ok:
                _mark_done(d, _key(step))
            outcomes.append(ok)
        return sum(outcomes), outcomes.count(False)

    def run_deferred(self, item: "Deferred") -> None:
        """The deferred sweep, if it is still needed now that the sweeps it waited for have finished."""
        if self.dry_run or item.needed():
            self.run_sweep(item.job)
        else:
            self._record(f"sweep {item.job.sweep_name}", item.job.claims, "skipped", time.monotonic(),
                         "not needed: look 1 decided its claims beyond any correction")

    # ---- runs ---------------------------------------------------------------------------------

    def run_argv(self, job: RunJob) -> list[str]:
        return [str(self.bin_dir / job.program), *job.overrides, f"run_dir={self.run_root / job.run_name}"]

    def run_one(self, job: RunJob) -> None:
        started = time.monotonic()
        label = f"run {job.run_name}"
        argv = self.run_argv(job)
        if self.dry_run:
            self.say(f"# {job.run_name}: {', '.join(job.claims)}")
            self.say(_shell(argv))
            self._record(label, job.claims, "planned", started)
            return
        run_dir = self.run_root / job.run_name
        if RunDir(run_dir).has_summary:
            self._record(label, job.claims, "skipped", started, "summary.json exists")
            return
        self._record_freeze(run_freeze_file(run_dir), job.claims)
        ok = self._call(argv, self.run_root / f"{job.run_name}.log")
        self._record(label, job.claims, "done" if ok else "failed", started,
                     "" if ok else f"log: {self.run_root / (job.run_name + '.log')}")

    # ---- suites -------------------------------------------------------------------------------

    def suite_argv(self, job: SuiteJob) -> list[str]:
        """headlab-analyze-hf on every checkpoint of the suite into the fixed folder (it resumes itself)."""
        argv = [str(self.bin_dir / job.program), f"suite={job.suite}", *job.command, f"run_dir={self.folder(job)}"]
        given = {a.split("=", 1)[0].lstrip("+~") for a in (*argv, *self.extra)}
        defaults = [d for d in (*SCALE_DEFAULTS[self.scale], f"threads={self.threads()}") if d.split("=", 1)[0] not in given]
        return argv + defaults + list(self.extra)

    def run_suite(self, job: SuiteJob) -> None:
        started = time.monotonic()
        label = f"suite {job.sweep_name}"
        folder = self.folder(job)
        argv = self.suite_argv(job)
        if self.dry_run:
            from headlab.hf.suite import load_suite, suite_lines

            self.say(f"# {job.sweep_name}: {', '.join(job.claims)}")
            for line in suite_lines(load_suite(job.suite), _setting(argv, "cache_dir")):
                self.say(f"#   {line}")
            self.say(_shell(argv))
            self.say(f"  then: {_shell([str(self.bin_dir / 'headlab-aggregate'), str(folder)])}")
            self._record(label, job.claims, "planned", started)
            return
        # beside the suite folder, not in it: headlab-analyze-hf writes only into a new folder or its own suite's
        self._record_freeze(folder.parent / FREEZE_FILE, job.claims)
        before = _measured_parts(folder)
        measured_ok = self._call(argv, folder.parent / LOGS / "analyze-hf.log")
        ran = _measured_parts(folder) - before
        aggregated = True
        if ran or not (folder / "aggregate" / "sweep_runs.csv").is_file():
            aggregated = self._call([str(self.bin_dir / "headlab-aggregate"), str(folder)], folder.parent / LOGS / "aggregate.log")
        problems = [p for p, bad in (("measuring failed", not measured_ok), ("aggregation failed", not aggregated)) if bad]
        self._record(label, job.claims, "failed" if problems else ("done" if ran else "skipped"), started,
                     f"{_measured_parts(folder)} checkpoints measured ({ran} now)"
                     + (f"; {'; '.join(problems)} (logs: {folder.parent / LOGS})" if problems else ""))

    # ---- plumbing -----------------------------------------------------------------------------

    def _record_freeze(self, path: Path, claims: Sequence[str]) -> None:
        """Before any job starts: which spec (hash, commits) each claim of this sweep or run is held to."""
        if self.freeze and any(c in self.freeze for c in claims):
            record_start(path, claims, self.freeze, self.scale)

    def _call(self, argv: Sequence[str], log: Path) -> bool:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"\n$ {_shell(argv)}\n")
            out.flush()
            return subprocess.run(list(argv), stdout=out, stderr=subprocess.STDOUT, check=False).returncode == 0

    def _record(self, step: str, claims: Sequence[str], status: str, started: float, detail: str = "") -> None:
        result = StepResult(step, " ".join(claims), status, round(time.monotonic() - started, 1), detail)
        self.results.append(result)
        if not self.dry_run:
            self.say(f"{status:>8}  {step:<38} {result.wall_s:>7.0f} s  {result.claims}  {detail}")


@dataclass(frozen=True)
class Deferred:
    """A sweep a lane may start once the sweeps named in `after` have finished, if `needed()` still
    says so then (the cpu scale's look 2, started beside the rest of look 1)."""

    job: SweepJob
    after: tuple[str, ...]
    needed: Callable[[], bool]


def run_plan(runner: Runner, sweeps: list[SweepJob], runs: list[RunJob | SuiteJob], deferred: Sequence[Deferred] = ()) -> dict[str, Path]:
    """Every sweep and run (a suite is a run: headlab-analyze-hf, then headlab-aggregate), `runner.lanes`
    at a time in plan order (a sweep waits for the sweep holding its teacher; a deferred sweep for its `after` sweeps, then runs only if still needed);
    returns sweep_name -> folder of the sweeps that have an aggregate, for the report's explicit
    evidence. A dry run prints the plan in order."""
    if runner.dry_run or runner.lanes == 1:
        for job in sweeps:
            runner.run_sweep(job)
        for job in runs:
            runner.run_suite(job) if isinstance(job, SuiteJob) else runner.run_one(job)
        for item in deferred:
            runner.run_deferred(item)
    else:
        _in_lanes(runner, lane_order(sweeps) + list(runs) + list(deferred))
    if runner.dry_run:
        return {}
    every = [*sweeps, *(d.job for d in deferred), *(j for j in runs if isinstance(j, SuiteJob))]
    return {j.sweep_name: runner.folder(j) for j in every if (runner.folder(j) / "aggregate").is_dir()}


def _in_lanes(runner: Runner, queue: list[SweepJob | RunJob | Deferred]) -> None:
    """`runner.lanes` workers take the first ready item of the queue; a student sweep is ready once
    the sweep of its teacher has finished (done or failed), a deferred one once its `after` sweeps have."""
    lock = threading.Condition()
    finished: set[str] = set()
    pending = list(queue)

    planned = {i.sweep_name for i in queue if isinstance(i, SweepJob)}  # a name outside the plan is not waited for

    def ready(item: SweepJob | RunJob | Deferred) -> bool:
        if isinstance(item, Deferred):
            return set(item.after) & planned <= finished
        return not isinstance(item, SweepJob) or not item.teacher or item.teacher[0] in finished or item.teacher[0] not in planned

    def lane() -> None:
        while True:
            with lock:
                while pending and not any(ready(i) for i in pending):
                    lock.wait()
                if not pending:
                    return
                item = next(i for i in pending if ready(i))
                pending.remove(item)
            try:
                if isinstance(item, Deferred):
                    runner.run_deferred(item)
                elif isinstance(item, SweepJob):
                    runner.run_sweep(item)
                elif isinstance(item, SuiteJob):
                    runner.run_suite(item)
                else:
                    runner.run_one(item)
            finally:
                with lock:
                    if isinstance(item, SweepJob):
                        finished.add(item.sweep_name)
                    lock.notify_all()

    with ThreadPoolExecutor(max_workers=runner.lanes) as pool:
        for future in [pool.submit(lane) for _ in range(runner.lanes)]:
            future.result()


def _completed_jobs(folder: Path) -> list[Path]:
    """The job dirs of a multirun folder whose summary.json says completed."""
    return [p.parent for p in sorted(folder.glob(f"*/{SUMMARY}")) if RunDir(p.parent).summary.get("status") == "completed"]


def _measured_parts(folder: Path) -> int:
    """Checkpoints measured in a suite folder: one head_metrics part per (seed, step) (headlab.hf.suite.measured)."""
    return len(list(folder.glob("*/head_metrics.parquet/part-*.parquet")))


def _setting(argv: Sequence[str], key: str) -> str | None:
    """The value of `key=...` on a command line (the last one), None when not given."""
    found = [a.split("=", 1)[1] for a in argv if a.split("=", 1)[0] == key]
    return (found[-1] or None) if found else None


def _matches(job_dir: Path, where: tuple[tuple[str, Any], ...]) -> bool:
    """The job's composed config holds every `where` value (4 matches 4.0; a group matches its choice)."""
    if not where:
        return True
    from omegaconf import OmegaConf

    job = RunDir(job_dir)
    cfg = OmegaConf.load(job.hydra_config_path)
    choices: dict[str, Any] = {}
    hydra_file = job.hydra_file_path
    if hydra_file.is_file():
        choices = dict(OmegaConf.load(hydra_file).hydra.runtime.choices)
    for key, wanted in where:
        value = choices[key] if key in choices else OmegaConf.select(cfg, key, default=None)
        if not same_value(value, wanted):
            return False
    return True


def _key(step: PerJob) -> str:
    return _shell([step.command, *step.args])


def _done_steps(job_dir: Path) -> dict[str, Any]:
    try:
        return json.loads(RunDir(job_dir).reproduce_steps_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _mark_done(job_dir: Path, key: str) -> None:
    from headlab.store import atomic_write_json

    done = _done_steps(job_dir)
    done[key] = time.strftime("%Y-%m-%dT%H:%M:%S")
    atomic_write_json(RunDir(job_dir).reproduce_steps_path, done)


def _where_text(where: tuple[tuple[str, Any], ...]) -> str:
    return ", ".join(f"{k}={v}" for k, v in where)


def _shell(argv: Sequence[str]) -> str:
    """The command as one would type it: the program relative to here when it lies below."""
    program = Path(argv[0])
    if program.is_absolute() and program.is_relative_to(Path.cwd()):
        program = program.relative_to(Path.cwd())
    return " ".join(shlex.quote(str(a)) for a in (program, *argv[1:]))
