"""The run directory's contract: the ONE place that knows what a run dir holds and how to find it.

Training, the later tools (importance, prune, doctor, HF analysis), the sweeps, the reproduce
runner and distillation all read and write the same files (docs/outputs.md). Every file name of
that contract is spelled here once, as a module constant (importable from `headlab.store`) and as
a path on `RunDir`; `summary.json` has one reader, checkpoints one finder, the saved config one
lookup. Nothing here unpickles a checkpoint or instantiates a config: a checkpoint's step is read
through `headlab.store.checkpoint_file.load_checkpoint(path, mmap=True)` (tensors only, imported when
asked, so `store/` stays free of torch and Lightning at import time).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from headlab.errors import ConfigError, DataError
from headlab.store.atomic import atomic_write_json

# --- the files of a run dir (docs/outputs.md) ------------------------------------------------------
SUMMARY = "summary.json"
VOCAB = "vocab.json"
METRICS_CSV = "metrics.csv"
TRAIN_LOG = "train.log"
HEAD_METRICS = "head_metrics.parquet"
HEAD_PAIRS = "head_pairs.parquet"
ATTENTION_MAPS = "attention_maps.npz"
PROBE_PATTERNS = "probe_patterns"  # one npz per measurement: a few probe sentences' maps (headlab.store.probe_patterns)
VIEW = "view.html"  # headlab-view's page of a run or sweep
INTERVENTIONS = "interventions.json"
HEAD_IMPORTANCE = "head_importance.parquet"
IMPORTANCE_CURVES = "importance_curves.parquet"
IMPORTANCE_REPORT = "importance.json"
PRUNE_CURVE = "prune_curve.parquet"
PRUNE_REPORT = "prune.json"
PRUNED_DIR = "pruned"
DOCTOR_REPORT = "doctor.json"
REPRODUCE_STEPS = "reproduce_steps.json"
FIGURES_DIR = "figures"
CHECKPOINTS_DIR = "checkpoints"
LAST_CHECKPOINT = "last.ckpt"
BEST_CHECKPOINT_PREFIX = "best"  # ModelCheckpoint's filename in conf/callbacks/checkpoints.yaml
CHECKPOINT_SUFFIX = ".ckpt"
# Hydra's folder and the per-start copies of it (headlab.tasks.history)
HYDRA_DIR = ".hydra"
CONFIG_FILE = "config.yaml"
HYDRA_FILE = "hydra.yaml"
OVERRIDES_FILE = "overrides.yaml"
HYDRA_FILES = (CONFIG_FILE, HYDRA_FILE, OVERRIDES_FILE)
SEGMENTS_DIR = "segments"
SEGMENT_SETTINGS = "resolved.json"
SEGMENT_INFO = "segment.json"
# held (fcntl lock) by the one process writing the run dir; holds that process's pid (headlab.tasks.lock)
LOCK_FILE = ".lock"
# figures/ of a run
ATTENTION_GRID_FIGURE = "attention_grid.png"
METRIC_TRAJECTORIES_FIGURE = "metric_trajectories.png"
ROLE_TIMELINE_FIGURE = "role_timeline.png"
HEAD_SIMILARITY_FIGURE = "head_similarity.png"
IMPORTANCE_FIGURE = "importance.png"
IMPORTANCE_TIMELINE_FIGURE = "importance_timeline.png"
REDUNDANCY_FIGURE = "redundancy.png"
PRUNE_CURVE_FIGURE = "prune_curve.png"
INDUCTION_PHASE_FIGURE = "induction_phase.png"  # task=lm: scores over steps, loss and ICL beneath
INDUCTION_GRID_FIGURE = "induction_grid.png"  # task=lm: the strongest induction head on the probe

CHECKPOINT_CHOICES = ("last", "best", "all")


def step_checkpoint_name(step: int) -> str:
    """The name of the checkpoint `RunCheckpoint(keep_every_n_train_steps=...)` keeps at `step`."""
    return f"step{step:06d}{CHECKPOINT_SUFFIX}"


@dataclass(frozen=True)
class RunCheckpointFile:
    """A checkpoint of a run and the optimiser step / epoch it holds."""

    path: Path
    step: int
    epoch: int


class RunDir:
    """A view of one run directory: its file paths, summary, checkpoints, config and tables.

    `summary` is read once per `RunDir` (`write_summary` replaces the file and a remover calls
    `forget_summary`, so a `RunDir` passed down a command never shows a stale one); paths are computed, never checked, so a `RunDir` can name files not yet written.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # --- paths -----------------------------------------------------------------------------------
    @property
    def summary_path(self) -> Path:
        return self.path / SUMMARY

    @property
    def vocab_path(self) -> Path:
        return self.path / VOCAB

    @property
    def metrics_csv_path(self) -> Path:
        return self.path / METRICS_CSV

    @property
    def train_log_path(self) -> Path:
        return self.path / TRAIN_LOG

    @property
    def head_metrics_path(self) -> Path:
        return self.path / HEAD_METRICS

    @property
    def head_pairs_path(self) -> Path:
        return self.path / HEAD_PAIRS

    @property
    def attention_maps_path(self) -> Path:
        return self.path / ATTENTION_MAPS

    @property
    def probe_patterns_dir(self) -> Path:
        return self.path / PROBE_PATTERNS

    @property
    def view_path(self) -> Path:
        return self.path / VIEW

    @property
    def interventions_path(self) -> Path:
        return self.path / INTERVENTIONS

    @property
    def head_importance_path(self) -> Path:
        return self.path / HEAD_IMPORTANCE

    @property
    def importance_curves_path(self) -> Path:
        return self.path / IMPORTANCE_CURVES

    @property
    def importance_report_path(self) -> Path:
        return self.path / IMPORTANCE_REPORT

    @property
    def prune_curve_path(self) -> Path:
        return self.path / PRUNE_CURVE

    @property
    def prune_report_path(self) -> Path:
        return self.path / PRUNE_REPORT

    @property
    def pruned_dir(self) -> Path:
        return self.path / PRUNED_DIR

    def pruned_checkpoint(self, label: str) -> Path:
        """Where headlab-prune saves the network pruned under `label`."""
        return self.pruned_dir / f"{label}{CHECKPOINT_SUFFIX}"

    def relative(self, path: str | os.PathLike) -> str:
        """`path` as recorded inside the run dir: relative to it when it lies inside (`checkpoints/last.ckpt`),
        so the record works from any directory and after the run dir moves; else absolute."""
        resolved = Path(path).resolve()
        root = self.path.resolve()
        return resolved.relative_to(root).as_posix() if resolved.is_relative_to(root) else str(resolved)

    def recorded_path(self, recorded: str | os.PathLike) -> Path:
        """A path a record of this run holds, as a file to open: absolute as is; relative, against the run
        dir (`relative` wrote it), else, for a record from before, against the working directory."""
        path = Path(recorded)
        if path.is_absolute() or not (self.path / path).exists() and path.exists():
            return path
        return self.path / path


    @property
    def doctor_report_path(self) -> Path:
        return self.path / DOCTOR_REPORT

    @property
    def reproduce_steps_path(self) -> Path:
        return self.path / REPRODUCE_STEPS

    @property
    def figures_dir(self) -> Path:
        return self.path / FIGURES_DIR

    def figure(self, name: str) -> Path:
        return self.figures_dir / name

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / CHECKPOINTS_DIR

    @property
    def last_checkpoint_path(self) -> Path:
        """`checkpoints/last.ckpt`: always the newest completed state (where `resume=true` continues)."""
        return self.checkpoints_dir / LAST_CHECKPOINT

    def step_checkpoint(self, step: int) -> Path:
        return self.checkpoints_dir / step_checkpoint_name(step)

    @property
    def hydra_dir(self) -> Path:
        return self.path / HYDRA_DIR

    @property
    def hydra_config_path(self) -> Path:
        return self.hydra_dir / CONFIG_FILE

    @property
    def hydra_file_path(self) -> Path:
        return self.hydra_dir / HYDRA_FILE

    @property
    def hydra_overrides_path(self) -> Path:
        return self.hydra_dir / OVERRIDES_FILE

    @property
    def lock_path(self) -> Path:
        return self.path / LOCK_FILE

    def run_files(self) -> list[str]:
        """The names in the folder that are a run's own output (not Hydra's startup files, the lock or
        hidden files): a folder with any of them holds a run that a fresh start would clobber."""
        if not self.path.is_dir():
            return []
        startup = {HYDRA_DIR, TRAIN_LOG, LOCK_FILE}
        return sorted(p.name for p in self.path.iterdir() if p.name not in startup and not p.name.startswith("."))

    @property
    def segments_dir(self) -> Path:
        return self.path / SEGMENTS_DIR

    def segment_dirs(self) -> list[Path]:
        """`segments/<n>/`, oldest (the first start) first."""
        root = self.segments_dir
        found = [p for p in root.iterdir() if p.is_dir() and p.name.isdigit()] if root.is_dir() else []
        return sorted(found, key=lambda p: int(p.name))

    # --- summary.json ----------------------------------------------------------------------------
    @property
    def has_summary(self) -> bool:
        """A summary.json exists: the run started (the mark of a run dir for the doctor and the runners)."""
        return self.summary_path.is_file()

    def load_summary(self) -> Any:
        """summary.json parsed, whatever JSON it holds; `OSError` / `ValueError` pass through, for a
        caller that reports a broken file in its own words (the sweep's reasons)."""
        return json.loads(self.summary_path.read_text(encoding="utf-8"))

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Replace summary.json atomically; the next `summary` reads what was written, so a `RunDir`
        passed down a command never shows a stale one."""
        atomic_write_json(self.summary_path, summary)
        self.forget_summary()

    def forget_summary(self) -> None:
        """Drop the summary read so far: the next `summary` reads the file again."""
        self.__dict__.pop("summary", None)

    @cached_property
    def summary(self) -> dict[str, Any]:
        """summary.json, or `{}` when it is missing, unreadable or not an object (a run that never
        started, or one killed before anything was written)."""
        try:
            loaded = self.load_summary()
        except (OSError, ValueError):
            return {}
        return loaded if isinstance(loaded, dict) else {}

    def require_summary(self) -> dict[str, Any]:
        """summary.json for a caller that cannot go on without it: a missing, broken or non-object
        file is a `DataError` naming it."""
        try:
            loaded = self.load_summary()
        except (OSError, ValueError) as err:
            raise DataError(self.summary_path, f"cannot be read ({err})") from err
        if not isinstance(loaded, dict):
            raise DataError(self.summary_path, f"expected a JSON object, got {type(loaded).__name__}")
        return loaded

    @property
    def run_id(self) -> str:
        """The summary's `run_id`, else the folder's name (the id every table row of the run carries)."""
        return str(self.summary.get("run_id") or self.path.name)

    # --- checkpoints -----------------------------------------------------------------------------
    def existing_last_checkpoint(self) -> Path | None:
        """`checkpoints/last.ckpt`, or None before the first one was written."""
        last = self.last_checkpoint_path
        return last if last.is_file() else None

    def best_checkpoint(self) -> Path | None:
        """The file of the summary's `best_checkpoint` name in this run's `checkpoints/` (the run dir may
        have moved), else that path when it lies inside this run dir; None otherwise."""
        best = self.summary.get("best_checkpoint")
        return self.own_checkpoint(best) if best else None

    def own_checkpoint(self, recorded: str | os.PathLike) -> Path | None:
        """A checkpoint path a run recorded (summary.json, a checkpoint's callback state), as this run's
        own file: the same name in `checkpoints/`, else the path itself when it lies inside this run dir;
        None otherwise. A copied or moved run's records still name the original's absolute paths, and
        loading another run's checkpoint through them would be silently wrong."""
        for candidate in (self.checkpoints_dir / Path(recorded).name, Path(recorded)):
            if candidate.is_file() and candidate.resolve().is_relative_to(self.path.resolve()):
                return candidate
        return None

    def teacher_checkpoint(self, which: str) -> Path | None:
        """The checkpoint a distillation teacher loads: `best` (the summary's best, else last) or
        `last`; None when the run has no last.ckpt to fall back on."""
        if which == "best":
            best = self.best_checkpoint()
            if best is not None:
                return best
        return self.existing_last_checkpoint()

    def find_checkpoints(self, which: str) -> list[RunCheckpointFile]:
        """`last` (checkpoints/last.ckpt), `best` (the best-*.ckpt) or `all` (every checkpoint, one per
        step), sorted by step; where two files hold the same step (last == best), last.ckpt is kept."""
        if which not in CHECKPOINT_CHOICES:
            raise ConfigError("checkpoint", which, f"one of {', '.join(CHECKPOINT_CHOICES)}")
        folder = self.checkpoints_dir
        found = self._checkpoint_files()
        if not found:
            raise DataError(self.path, "has no checkpoints (checkpoints/*.ckpt): train it first, or point at a run dir")
        if which == "last":
            files = [f for f in found if f.name == LAST_CHECKPOINT]
        elif which == "best":
            files = [f for f in found if f.name.startswith(BEST_CHECKPOINT_PREFIX)]
        else:
            files = found
        if not files:
            raise DataError(folder, f"has no {which} checkpoint (found {', '.join(f.name for f in found)})")
        return _one_per_step([_describe(f) for f in files])

    def _checkpoint_files(self) -> list[Path]:
        folder = self.checkpoints_dir
        return sorted(folder.glob(f"*{CHECKPOINT_SUFFIX}")) if folder.is_dir() else []

    # --- the saved config ------------------------------------------------------------------------
    @property
    def config_path(self) -> Path | None:
        """The training config of the newest segment (`segments/<n>/config.yaml`, written by every
        start, Hydra or not), else Hydra's `.hydra/config.yaml`; None when neither exists."""
        candidates = [d / CONFIG_FILE for d in reversed(self.segment_dirs())] + [self.hydra_config_path]
        return next((p for p in candidates if p.is_file()), None)

    def config(self, required: tuple[str, ...] = ()) -> Any:
        """The `config_path` file loaded as a plain DictConfig (interpolations kept, nothing instantiated).
        The ONE reader of a run's saved config: a missing or unreadable file, one that holds no mapping,
        or one that lacks a `required` group (`data`, `model`) is a `DataError` naming the file, so every
        command that reads saved configs says so in one line."""
        import yaml
        from omegaconf import DictConfig, OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        if not self.path.is_dir():
            raise DataError(self.path, "no such run directory")
        path = self.config_path
        if path is None:
            raise DataError(self.path, "not a headlab run directory (no segments/<n>/config.yaml or .hydra/config.yaml)")
        try:
            cfg = OmegaConf.load(path)
        except (OSError, ValueError, yaml.YAMLError, OmegaConfBaseException) as err:
            raise DataError(path, f"the run's saved config cannot be read ({' '.join(str(err).split())[:200]})") from None
        if not isinstance(cfg, DictConfig):
            raise DataError(path, "the run's saved config is not a mapping of groups")
        missing = [g for g in required if not OmegaConf.is_dict(cfg._get_node(g))]  # noqa: SLF001 - unresolved
        if missing:
            raise DataError(path, f"the run's saved config lacks the {', '.join(missing)} group(s) a training run records")
        return cfg

    def latest_settings(self) -> dict[str, Any] | None:
        """The settings of the newest segment (`segments/<n>/resolved.json`, what resume compares);
        None for a run from before segments were kept. An unreadable file is a `DataError` naming it."""
        for segment in reversed(self.segment_dirs()):
            path = segment / SEGMENT_SETTINGS
            if path.is_file():
                return self._json_object(path, "the run's saved settings")
        return None

    def segment_infos(self) -> list[dict[str, Any]]:
        """`segment.json` of every segment, oldest first; an unreadable one is a `DataError` naming it."""
        return [self._json_object(s / SEGMENT_INFO, "the run's segment record") for s in self.segment_dirs()
                if (s / SEGMENT_INFO).is_file()]

    @staticmethod
    def _json_object(path: Path, what: str) -> dict[str, Any]:
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise DataError(path, f"{what} cannot be read ({' '.join(str(err).split())[:200]})") from None
        if not isinstance(loaded, dict):
            raise DataError(path, f"{what} is not a JSON object")
        return loaded

    # --- the tables ------------------------------------------------------------------------------
    def table(self, name: str) -> pd.DataFrame:
        """A per-run table: a dataset folder through `store.read_table` (sorted), a single parquet file
        (the tools' `replace_steps` tables) as written; `FileNotFoundError` when the run has neither."""
        from headlab.store.tables import read_parquet_file, read_table

        path = self.path / name
        return read_parquet_file(path) if path.is_file() else read_table(path)

    def head_metrics(self) -> pd.DataFrame:
        return self.table(HEAD_METRICS)

    def head_pairs(self) -> pd.DataFrame:
        return self.table(HEAD_PAIRS)

    def head_importance(self) -> pd.DataFrame:
        return self.table(HEAD_IMPORTANCE)

    def importance_curves(self) -> pd.DataFrame:
        return self.table(IMPORTANCE_CURVES)

    def prune_curve(self) -> pd.DataFrame:
        return self.table(PRUNE_CURVE)


def _describe(path: Path) -> RunCheckpointFile:
    from headlab.store.checkpoint_file import load_checkpoint  # torch only when a checkpoint is read

    meta = load_checkpoint(path, mmap=True)
    return RunCheckpointFile(path, int(meta.get("global_step", 0)), int(meta.get("epoch", 0)))


def _one_per_step(files: list[RunCheckpointFile]) -> list[RunCheckpointFile]:
    by_step: dict[int, RunCheckpointFile] = {}
    for f in sorted(files, key=lambda f: (f.step, f.path.name != LAST_CHECKPOINT)):
        by_step.setdefault(f.step, f)
    return [by_step[s] for s in sorted(by_step)]


def run_dir_of_pruned(pruned: str | os.PathLike) -> RunDir:
    """The run dir a `pruned/<label>.ckpt` file belongs to."""
    return RunDir(Path(pruned).parent.parent)
