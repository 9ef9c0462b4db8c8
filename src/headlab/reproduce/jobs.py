"""The sweeps a set of claim specs needs, at one scale, each once (claims share sweeps)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from headlab.reproduce.spec import ClaimSpec

SCALES = ("quick", "full")
LAUNCHERS = {"quick": "joblib", "full": "slurm"}


@dataclass(frozen=True)
class SweepJob:
    """One `make sweep` call: the sweep, its overrides at this scale, and the claims that read it."""

    sweep: str
    sweep_name: str
    overrides: tuple[str, ...]
    claims: tuple[str, ...]
    launcher: str

    def command(self) -> str:
        """`make sweep SWEEP=<sweep> LAUNCHER=<launcher> ARGS='<overrides>'` (runs the jobs, then aggregates).

        >>> SweepJob("heads", "heads-zh_reviews", ("experiment=sweep_zh", "seed=0,1,2"), ("C8",), "joblib").command()
        "make sweep SWEEP=heads LAUNCHER=joblib ARGS='experiment=sweep_zh seed=0,1,2'"
        """
        return f"make sweep SWEEP={self.sweep} LAUNCHER={self.launcher} ARGS={shlex.quote(' '.join(self.overrides))}"


def sweep_jobs(specs: list[ClaimSpec], scale: str) -> list[SweepJob]:
    """The distinct (sweep, overrides) pairs of the specs with sweep evidence, in first-claim order."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}; got {scale!r}")
    jobs: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    names: dict[tuple[str, tuple[str, ...]], str] = {}
    for spec in specs:
        if "sweep" not in spec.evidence:
            continue
        key = (str(spec.evidence["sweep"]), tuple(spec.evidence[scale]))
        jobs.setdefault(key, []).append(spec.claim)
        names[key] = str(spec.sweep_name)
    return [SweepJob(sweep, names[(sweep, overrides)], overrides, tuple(claims), LAUNCHERS[scale])
            for (sweep, overrides), claims in jobs.items()]
