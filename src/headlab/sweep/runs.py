"""Find and read the job directories of a Hydra multirun folder, never crashing on a bad one.

A sweep folder holds `multirun.yaml` and one `<job_num>/` directory per job. Each job is read
into a `Run`; a job that cannot be used (not started, still running, failed, diverged, or with
a corrupt file) is still returned, with `reason` saying why, so the report can list it.
A run is used whole or not at all: a completed run whose head table is corrupt is skipped for
accuracy too, so every statistic of a config is computed over the same seeds.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from headlab.errors import DataError
from headlab.store import HEAD_METRICS, HEAD_PAIRS, RunDir, SweepDir
from headlab.sweep.lm_roles import with_lm_roles

log = logging.getLogger(__name__)

COMPLETED = "completed"
MISSING = "missing"
UNREADABLE = "unreadable"
DEFAULT_CONFIG = "(defaults)"

_METRIC_COLUMNS = ("step", "layer", "head", "metric", "value")
_PAIR_COLUMNS = ("step", "layer", "head_a", "head_b", "metric", "value")
_VAL_ACC = "val/acc"


@dataclass
class Run:
    """One job of the sweep. `reason == ""` means usable; otherwise it says why not.

    `status`: the summary's status (completed / running / failed / diverged / interrupted), or
    `missing` (no job dir or no summary.json) or `unreadable` (a file could not be parsed).
    `val_curve`: columns `step, val_acc` from metrics.csv (None if the run logged none).
    """

    job: str
    run_dir: Path
    status: str
    reason: str = ""
    overrides: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    head_metrics: pd.DataFrame | None = None
    head_pairs: pd.DataFrame | None = None
    val_curve: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)

    @cached_property
    def files(self) -> RunDir:
        """The job's run directory (its file names, summary, checkpoints)."""
        return RunDir(self.run_dir)

    @property
    def usable(self) -> bool:
        return self.reason == ""

    @property
    def seed(self) -> int | None:
        value = self.summary.get("swept", {}).get("seed", self.override_values().get("seed"))
        try:
            return int(value) if value is not None else None
        except (TypeError, ValueError):
            return None

    @property
    def config(self) -> str:
        """The job's overrides without `seed`, sorted: runs with equal `config` are seeds of one config."""
        kept = sorted(o for o in self.overrides if _override_key(o) != "seed")
        return ",".join(kept) if kept else DEFAULT_CONFIG

    def override_values(self) -> dict[str, str]:
        """key -> value of the job's overrides; a plain `key=` wins over an appended `+key=` of the same key
        (headlab-distill appends `+distill=default`, a sweep then picks `distill=NAME`)."""
        values: dict[str, str] = {}
        for o in sorted((o for o in self.overrides if "=" in o), key=lambda o: not o.startswith("+")):
            values[_override_key(o)] = o.split("=", 1)[1]
        return values


def discover_runs(sweep: SweepDir) -> list[Run]:
    """Every job of the sweep, sorted by job number, including expected jobs without a dir."""
    sweep_dir = sweep.path
    if not sweep_dir.is_dir():
        raise DataError(sweep_dir, "no such directory (expected a Hydra multirun folder)")
    job_dirs = {p.name: p for p in sweep.job_paths()}
    expected = expected_jobs(sweep)
    if not job_dirs and not expected:
        raise DataError(sweep_dir, "no job directories (<job_num>/) and no multirun.yaml: is this a Hydra multirun folder?")
    runs = [load_run(path) for path in job_dirs.values()]
    for num, overrides in enumerate(expected or []):
        if str(num) not in job_dirs:
            runs.append(Run(str(num), sweep.job_path(num), MISSING, "no job directory (not started yet, or the sweep stopped)",
                            overrides=overrides))
    return sorted(runs, key=lambda r: int(r.job))


def load_run(job_dir: str | os.PathLike) -> Run:
    """Read one job directory; any unreadable file makes the run `unreadable` with the reason."""
    job_dir = Path(job_dir)
    run = Run(job_dir.name, job_dir, MISSING)
    try:
        _read_files(run)
    except DataError as err:
        run.status, run.reason = UNREADABLE, str(err)
    except Exception as err:  # untrusted files: report and go on, whatever went wrong
        run.status, run.reason = UNREADABLE, f"{type(err).__name__}: {err}"
    return run


def _read_files(run: Run) -> None:
    """Fill `run` from its files; leaves `reason` set when the run cannot be used."""
    run.overrides = _read_overrides(run.files)
    files = run.files
    if not files.has_summary:
        run.reason = "no summary.json (the job never reached training)"
        return
    run.summary = _read_summary(files)
    if not run.overrides and run.summary.get("overrides"):
        run.overrides = [o for o in str(run.summary["overrides"]).split(",") if "=" in o]
    run.status = str(run.summary.get("status", "unknown"))
    if run.status != COMPLETED:
        error = run.summary.get("error")
        hint = " (still running, or killed without a chance to record it)" if run.status == "running" else ""
        run.reason = f"status {run.status!r}{hint}" + (f": {error}" if error else "")
        return
    run.head_metrics = with_lm_roles(_read_optional_table(run, HEAD_METRICS, _METRIC_COLUMNS))  # LM runs: roles from scores
    run.head_pairs = _read_optional_table(run, HEAD_PAIRS, _PAIR_COLUMNS)
    run.val_curve = _read_val_curve(run)


def _read_overrides(files: RunDir) -> list[str]:
    path = files.hydra_overrides_path
    if not path.is_file():
        return []
    import yaml

    overrides = _parse(path, lambda: yaml.safe_load(path.read_text(encoding="utf-8"))) or []
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise DataError(path, f"expected a YAML list of 'key=value' strings, got {type(overrides).__name__}")
    return overrides


def _read_summary(files: RunDir) -> dict[str, Any]:
    path = files.summary_path
    summary = _parse(path, files.load_summary)
    if not isinstance(summary, dict):
        raise DataError(path, f"expected a JSON object, got {type(summary).__name__}")
    if not isinstance(summary.get("swept", {}), dict):
        raise DataError(path, "'swept' must be an object of swept values")
    return summary


def _read_optional_table(run: Run, name: str, columns: tuple[str, ...]) -> pd.DataFrame | None:
    """A dataset folder (or a single parquet file); absent -> None with a note, corrupt -> raises."""
    path = run.run_dir / name
    if not path.exists() or (path.is_dir() and not any(path.glob("part-*.parquet"))):
        run.notes.append(f"no {name}")
        return None
    df = _parse(path, lambda: run.files.table(name))
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(path, f"missing columns {missing}; has {list(df.columns)}")
    return df


def _read_val_curve(run: Run) -> pd.DataFrame | None:
    path = run.files.metrics_csv_path
    if not path.is_file():
        run.notes.append("no metrics.csv")
        return None
    rows = _parse(path, lambda: pd.read_csv(path))
    if _VAL_ACC not in rows.columns or "step" not in rows.columns:
        run.notes.append(f"metrics.csv has no {_VAL_ACC!r}")
        return None
    curve = rows.loc[rows[_VAL_ACC].notna(), ["step", _VAL_ACC]].rename(columns={_VAL_ACC: "val_acc"})
    return curve.astype({"step": "int64", "val_acc": "float64"}).reset_index(drop=True)


def expected_jobs(sweep: SweepDir) -> list[list[str]] | None:
    """Each job's overrides, by job number, from `multirun.yaml` (None when it cannot be told).

    Re-expands the sweep the way Hydra's basic sweeper does (the joblib and submitit launchers
    use it too), so a job that never created its directory is still reported as missing.
    """
    path = sweep.multirun_path
    if not path.is_file():
        return None
    try:
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from omegaconf import OmegaConf

        cfg = OmegaConf.load(path)
        if not str(OmegaConf.select(cfg, "hydra.sweeper._target_", default="")).endswith("BasicSweeper"):
            return None
        params = OmegaConf.to_container(cfg.hydra.sweeper.get("params") or OmegaConf.create({}), resolve=False)
        task = OmegaConf.to_container(cfg.hydra.overrides.task, resolve=False)
        overrides = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()] + list(task))
        return BasicSweeper.split_arguments(overrides, None)[0]
    except Exception as err:  # a sweep we cannot re-expand: fall back to the job dirs present
        log.info("cannot expand the sweep in %s (%s): reporting only the job dirs present", path, err)
        return None


def _parse(path: Path, read: Callable[[], Any]) -> Any:
    """`read()`, with any parser error re-raised as a DataError naming the file."""
    try:
        return read()
    except Exception as err:  # json, yaml, pyarrow, csv and OS errors all mean "cannot use this file"
        raise DataError(path, f"cannot be read ({type(err).__name__}: {err})") from err


def _override_key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")
