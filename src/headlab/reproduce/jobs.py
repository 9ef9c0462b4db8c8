"""The sweeps a set of claim specs needs at one scale, each once (claims share sweeps)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from headlab.errors import ConfigError
from headlab.reproduce.spec import RUN_COMMANDS, SCALES, ClaimSpec

LAUNCHERS = {"quick": "joblib", "full": "slurm"}


@dataclass(frozen=True)
class SweepJob:
    """One `make sweep` call: the sweep, its folder name and overrides at this scale, the claims that read it."""

    sweep: str
    sweep_name: str
    overrides: tuple[str, ...]
    claims: tuple[str, ...]
    launcher: str

    def command(self) -> str:
        """`make sweep` with the folder name fixed, so the report finds the sweep it asked for.

        >>> SweepJob("heads", "heads-zh_reviews", ("experiment=sweep_zh", "seed=0,1,2"), ("C8",), "joblib").command()
        "make sweep SWEEP=heads LAUNCHER=joblib ARGS='experiment=sweep_zh seed=0,1,2 sweep_name=heads-zh_reviews'"
        """
        args = " ".join((*self.overrides, f"sweep_name={self.sweep_name}"))
        return f"make sweep SWEEP={self.sweep} LAUNCHER={self.launcher} ARGS={shlex.quote(args)}"


def sweep_jobs(specs: list[ClaimSpec], scale: str) -> list[SweepJob]:
    """One job per sweep folder name, in first-claim order. Two specs that give one folder name
    different sweeps or overrides would read each other's evidence: a ConfigError."""
    if scale not in SCALES:
        raise ConfigError("scale", scale, f"one of {', '.join(SCALES)}")
    jobs: dict[str, tuple[str, tuple[str, ...], list[str]]] = {}
    for spec in specs:
        if "sweep" not in spec.evidence:
            continue
        name, sweep, overrides = spec.sweep_name(scale), str(spec.evidence["sweep"]), spec.overrides(scale)
        if name in jobs and jobs[name][:2] != (sweep, overrides):
            other = jobs[name][2][0]
            raise ConfigError(f"{spec.claim}: evidence.{scale}", name,
                              f"a sweep_name of its own: {other} runs {jobs[name][0]} {' '.join(jobs[name][1])} under it")
        jobs.setdefault(name, (sweep, overrides, []))[2].append(spec.claim)
    return [SweepJob(sweep, name, overrides, tuple(claims), LAUNCHERS[scale]) for name, (sweep, overrides, claims) in jobs.items()]


@dataclass(frozen=True)
class RunJob:
    """One command that writes a run directory a claim reads (e.g. headlab-analyze-hf on MiniLM)."""

    program: str
    run_name: str
    overrides: tuple[str, ...]
    claims: tuple[str, ...]

    def command(self) -> str:
        """The command with its run directory fixed under `<log dir>/runs/reproduce/`.

        >>> RunJob("headlab-analyze-hf", "c17-minilm", ("data=en_news",), ("C17",)).command()
        'headlab-analyze-hf data=en_news run_dir="${HEADLAB_LOG_DIR:-logs}/runs/reproduce/c17-minilm"'
        """
        args = " ".join(shlex.quote(o) for o in self.overrides)
        return f'{self.program} {args} run_dir="${{HEADLAB_LOG_DIR:-logs}}/runs/reproduce/{self.run_name}"'


def run_jobs(specs: list[ClaimSpec], scale: str) -> list[RunJob]:
    """One job per run name of the specs with `run` evidence; a name reused with another command is a ConfigError."""
    jobs: dict[str, RunJob] = {}
    for spec in specs:
        if "run" not in spec.evidence:
            continue
        at = spec.evidence[scale]
        job = RunJob(RUN_COMMANDS[spec.evidence["run"]], spec.run_name(scale), tuple(at["command"]), (spec.claim,))
        seen = jobs.get(job.run_name)
        if seen and (seen.program, seen.overrides) != (job.program, job.overrides):
            raise ConfigError(f"{spec.claim}: evidence.{scale}", job.run_name, f"a run_name of its own: {seen.claims[0]} uses it")
        jobs[job.run_name] = RunJob(job.program, job.run_name, job.overrides, (*seen.claims, spec.claim)) if seen else job
    return list(jobs.values())
