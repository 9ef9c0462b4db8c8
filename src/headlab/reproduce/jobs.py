"""The sweeps a set of claim specs needs at one scale, each once (claims share sweeps)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from headlab.errors import ConfigError
from headlab.reproduce.provenance import expected_grid
from headlab.reproduce.spec import EVIDENCE_SCALES, RUN_COMMANDS, SUITES, ClaimSpec, PerJob

# the Hydra launcher each scale runs its sweeps with (suites: headlab-analyze-hf, no multirun, in this process's lane)
LAUNCHERS = {"quick": "joblib", "cpu": "joblib", "full": "slurm", SUITES: "basic"}  # the Hydra launcher each scale runs its sweeps with


@dataclass(frozen=True)
class SweepJob:
    """One sweep: its grid, folder name and overrides at this scale, the claims that read it, the
    program that runs it, its teacher (another sweep's job) and the commands run on its jobs."""

    sweep: str
    sweep_name: str
    overrides: tuple[str, ...]
    claims: tuple[str, ...]
    program: str = "headlab-train"
    teacher: tuple[str, tuple[tuple[str, Any], ...]] | None = None
    per_job: tuple[PerJob, ...] = ()


def sweep_jobs(specs: list[ClaimSpec], scale: str, elsewhere: frozenset[str] = frozenset()) -> list[SweepJob]:
    """One job per sweep folder name, in first-claim order. Two specs that give one folder name
    different sweeps or overrides would read each other's evidence: a ConfigError. The suites scale
    trains nothing (`suite_jobs`). `elsewhere`: sweeps of claims left out of this plan (`only=`); a
    teacher among them is read from its folder, not trained here."""
    if scale == SUITES:
        return []
    if scale not in EVIDENCE_SCALES:
        raise ConfigError("scale", scale, f"one of {', '.join(EVIDENCE_SCALES)}")
    jobs: dict[str, tuple[tuple, list[str], list[PerJob]]] = {}
    for spec in specs:
        if spec.evidence.kind != "sweep" or getattr(spec.evidence, scale) is None:
            continue
        name = spec.sweep_name(scale)
        identity = (spec.evidence.sweep, spec.overrides(scale), spec.program, spec.teacher(scale))
        if name in jobs and jobs[name][0] != identity:
            other, (sweep, overrides, program, _) = jobs[name][1][0], jobs[name][0]
            raise ConfigError(f"{spec.claim}: evidence.{scale}", name,
                              f"a sweep_name of its own: {other} runs {program} {sweep} {' '.join(overrides)} under it")
        _, claims, per_job = jobs.setdefault(name, (identity, [], []))
        claims.append(spec.claim)
        per_job.extend(p for p in spec.per_job(scale) if p not in per_job)
    found = [SweepJob(sweep, name, overrides, tuple(claims), program, teacher, tuple(per_job))
             for name, ((sweep, overrides, program, teacher), claims, per_job) in jobs.items()]
    return _teachers_first(_teacher_sweeps(specs, scale, jobs, elsewhere) + found, scale, elsewhere)


def _teacher_sweeps(specs: list[ClaimSpec], scale: str, planned, elsewhere: frozenset[str]) -> list[SweepJob]:
    """The sweeps that train a teacher no claim's sweep holds (`evidence.<scale>.teacher.sweep` and
    `overrides`), each once, listed under the claims whose students read it. Two specs that train one
    teacher folder differently would read each other's teacher: a ConfigError."""
    found: dict[str, SweepJob] = {}
    for spec in specs:
        if spec.evidence.kind != "sweep" or getattr(spec.evidence, scale) is None:
            continue
        training = spec.teacher_training(scale)
        if training is None or training[1] in elsewhere:
            continue
        sweep, name, overrides = training
        if name in planned:
            _check_held_teacher(spec, scale, training, planned[name][0][:2], planned[name][1][0])
            continue
        seen = found.get(name)
        if seen is not None and (seen.sweep, seen.overrides) != (sweep, overrides):
            raise ConfigError(f"{spec.claim}: evidence.{scale}.teacher", name,
                              f"a sweep_name of its own: {seen.claims[0]} trains {sweep} {' '.join(seen.overrides)} under it")
        found[name] = SweepJob(sweep, name, overrides, (*seen.claims, spec.claim) if seen else (spec.claim,))
    return list(found.values())


def _check_held_teacher(spec: ClaimSpec, scale: str, training, held: tuple, holder: str) -> None:
    """A teacher that another claim's sweep holds is trained by that sweep, not by the teacher's own
    settings: refuse the plan where the two disagree (another sweep file, or a setting both give whose
    held values leave out the teacher's), rather than read a teacher trained otherwise than the spec says."""
    sweep, name, overrides = training
    held_sweep, held_overrides = held
    at = f"{spec.claim}: evidence.{scale}.teacher"
    if held_sweep != sweep:
        raise ConfigError(f"{at}.sweep", sweep, f"{held_sweep}, the sweep file of {holder}'s sweep {name}, which trains the teacher")
    given = expected_grid(None, held_overrides)
    for key, values in expected_grid(None, overrides).items():
        if key in given and not set(values) <= set(given[key]):
            raise ConfigError(f"{at}.overrides", f"{key}={','.join(sorted(values))}",
                              f"{key}={','.join(sorted(given[key]))}, as {holder}'s sweep {name} trains the teacher")


def lane_order(sweeps: list[SweepJob]) -> list[SweepJob]:
    """The order lanes take sweeps in (the runner, and the estimate that mimics it): teachers' sweeps
    first, then their students (they wait for them anyway; a long student left to the end runs
    alone), then the rest, each group in plan order."""
    teachers = {j.teacher[0] for j in sweeps if j.teacher}
    return sorted(sweeps, key=lambda j: (j.sweep_name not in teachers, not j.teacher))


def _teachers_first(jobs: list[SweepJob], scale: str, elsewhere: frozenset[str] = frozenset()) -> list[SweepJob]:
    """A sweep whose teacher is a job of another sweep runs after it; a teacher sweep that is neither
    planned nor another claim's (`elsewhere`: its folder holds the teacher) is refused."""
    names = {j.sweep_name for j in jobs}
    for job in jobs:
        if job.teacher and job.teacher[0] not in names | elsewhere:
            raise ConfigError(f"{job.claims[0]}: evidence.{scale}.teacher.sweep_name", job.teacher[0],
                              f"a sweep of this scale ({', '.join(sorted(names))})")
    ordered: list[SweepJob] = []
    pending = list(jobs)
    while pending:
        ready = [j for j in pending if not j.teacher or j.teacher[0] not in names or j.teacher[0] in {o.sweep_name for o in ordered}]
        if not ready:
            raise ConfigError("evidence.teacher", [j.sweep_name for j in pending], "teachers that do not depend on each other")
        ordered.extend(ready)
        pending = [j for j in pending if j not in ready]
    return ordered


@dataclass(frozen=True)
class RunJob:
    """One command that writes a run directory a claim reads (e.g. headlab-analyze-hf on MiniLM)."""

    program: str
    run_name: str
    overrides: tuple[str, ...]
    claims: tuple[str, ...]


def run_jobs(specs: list[ClaimSpec], scale: str) -> list[RunJob]:
    """One job per run name of the specs with `run` evidence; a name reused with another command is a ConfigError.
    At the suites scale a `run` claim reads a suite (`suite_jobs`)."""
    jobs: dict[str, RunJob] = {}
    if scale == SUITES:
        return []
    for spec in specs:
        if spec.evidence.kind != "run" or getattr(spec.evidence, scale) is None:
            continue
        job = RunJob(RUN_COMMANDS[spec.evidence.run], spec.run_name(scale), spec.run_command(scale), (spec.claim,))
        seen = jobs.get(job.run_name)
        if seen and (seen.program, seen.overrides) != (job.program, job.overrides):
            raise ConfigError(f"{spec.claim}: evidence.{scale}", job.run_name, f"a run_name of its own: {seen.claims[0]} uses it")
        jobs[job.run_name] = RunJob(job.program, job.run_name, job.overrides, (*seen.claims, spec.claim)) if seen else job
    return list(jobs.values())


@dataclass(frozen=True)
class SuiteJob:
    """One checkpoint suite measured by `headlab-analyze-hf suite=...` into `<sweeps root>/<sweep_name>/reproduce`,
    then aggregated; every claim whose suites block names that folder reads it."""

    suite: str
    sweep_name: str
    command: tuple[str, ...]
    claims: tuple[str, ...]
    program: str = "headlab-analyze-hf"


def suites_name(at: Any, suite: str | None = None) -> str:
    """The folder name of a suites block, and with `suite` (use_suite=) given, the name with that suite's
    name in place of the spec's (polypythia-70m-en_news -> tiny-suite-en_news), so two suites never
    share a folder."""
    if suite is None:
        return str(at.sweep_name)
    from headlab.hf.suite import load_suite

    mine, spec_suite = load_suite(suite).name, str(at.suite)
    name = str(at.sweep_name)
    return name.replace(spec_suite, mine) if spec_suite in name else f"{mine}-{name}"


def suite_jobs(specs: list[ClaimSpec], suite: str | None = None) -> list[SuiteJob]:
    """One job per suites folder name, in first-claim order; `suite` (a name or folder) replaces every
    spec's suite (e.g. a local tiny suite). Two specs that give one folder different suites or
    settings would read each other's evidence: a ConfigError."""
    jobs: dict[str, SuiteJob] = {}
    for spec in specs:
        at = spec.evidence.suites
        if at is None or spec.not_measured:
            continue
        job = SuiteJob(suite or at.suite, suites_name(at, suite), tuple(at.command), (spec.claim,))
        seen = jobs.get(job.sweep_name)
        if seen and (seen.suite, seen.command) != (job.suite, job.command):
            raise ConfigError(f"{spec.claim}: evidence.suites", job.sweep_name,
                              f"a sweep_name of its own: {seen.claims[0]} measures {seen.suite} {' '.join(seen.command)} under it")
        jobs[job.sweep_name] = SuiteJob(job.suite, job.sweep_name, job.command, (*seen.claims, spec.claim)) if seen else job
    return list(jobs.values())
