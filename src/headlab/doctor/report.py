"""Diagnose a run or every job of a sweep: findings -> `doctor.json` (atomic) and a printed table; and what
`headlab-doctor` is asked to check (`DoctorCommand`, `headlab.cli.doctor` composes it): a run or sweep, or a
headlab-train command line (`headlab.doctor.plan`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from headlab.doctor.checks import FAIL, NOT_MEASURED, WARN, Finding, Thresholds, run_checks
from headlab.doctor.inputs import load_run_tables
from headlab.errors import ConfigError, DataError, HeadlabError
from headlab.store import RunDir, SweepDir, atomic_write_json
from headlab.store.run_dir import DOCTOR_REPORT as DOCTOR_JSON

WHAT = "either a run or sweep directory (target=PATH) or headlab-train overrides (plan=['key=value',...])"


@dataclass
class DoctorCommand:
    """`headlab-doctor target=RUN_DIR|SWEEP_DIR` or `headlab-doctor plan=[key=value,...]`."""

    target: Optional[str] = None  # a run directory, or a multirun folder: every job is diagnosed
    plan: List[str] = field(default_factory=list)  # headlab-train overrides: the config checks, nothing trained

    def __post_init__(self) -> None:
        if (self.target is None) == (not self.plan):  # neither, or both
            raise ConfigError("target", self.target, WHAT)
        bad = [o for o in self.plan if "=" not in o]
        if bad:
            raise ConfigError("plan", bad[0], "key=value overrides of headlab-train")


_MARK = {"ok": "ok  ", WARN: "WARN", FAIL: "FAIL", NOT_MEASURED: "n/m "}


@dataclass
class Diagnosis:
    """The findings of one run (`error` set instead when the run could not be read at all)."""

    run_dir: Path
    findings: list[Finding]
    error: str = ""

    @property
    def worst(self) -> str:
        statuses = {f.status for f in self.findings}
        return FAIL if self.error or FAIL in statuses else WARN if WARN in statuses else "ok"

    def as_dict(self) -> dict:
        return {"run_dir": str(self.run_dir), "worst": self.worst, "error": self.error,
                "checks": [f.as_dict() for f in self.findings]}


def diagnose_run(run: RunDir, thresholds: Thresholds | None = None, write: bool = True) -> Diagnosis:
    """Run every check on one run; writes `<run_dir>/doctor.json` unless `write` is False."""
    try:
        diagnosis = Diagnosis(run.path, run_checks(load_run_tables(run), thresholds))
    except HeadlabError as err:
        diagnosis = Diagnosis(run.path, [], str(err))
    if write and run.has_summary:
        atomic_write_json(run.doctor_report_path, diagnosis.as_dict())
    return diagnosis


def diagnose(path: str | os.PathLike, thresholds: Thresholds | None = None) -> list[Diagnosis]:
    """A run directory -> its diagnosis; a sweep directory -> one per job (each job's doctor.json,
    and the sweep's own doctor.json listing them). DataError when `path` is neither."""
    path = Path(path)
    if not path.is_dir():
        raise DataError(path, "no such directory (expected a run directory or a sweep directory)")
    run = RunDir(path)
    if run.has_summary:
        return [diagnose_run(run, thresholds)]
    sweep = SweepDir(path)
    jobs = sweep.jobs()
    if not jobs:
        raise DataError(path, "neither a run directory (no summary.json) nor a sweep directory (no <job_num>/ folders)")
    results = [diagnose_run(job, thresholds) if job.has_summary else Diagnosis(job.path, [], "no summary.json (not started)")
               for job in jobs]
    atomic_write_json(sweep.doctor_report_path, {"sweep_dir": str(path), "jobs": [d.as_dict() for d in results]})
    return results


def format_diagnosis(d: Diagnosis) -> str:
    """A few lines per run: one per check with its status, message and the override to try."""
    lines = [f"{d.run_dir}: {d.worst}"]
    if d.error:
        return "\n".join(lines + [f"  FAIL  {d.error}"])
    for f in d.findings:
        line = f"  {_MARK.get(f.status, f.status)}  {f.check:<22} {f.message}"
        lines.append(line + (f"\n        try: {f.override}" if f.override and f.status in (WARN, FAIL) else ""))
    return "\n".join(lines)
