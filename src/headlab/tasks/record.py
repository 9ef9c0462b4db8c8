"""The run's record: `summary.json` from the first line of `train()` to its last, whatever happens.

`RunRecord` is a context manager: `start()` writes status "running" (and the config segment), the
body fills in results, and on exit the status says how the run ended (completed, interrupted,
diverged, failed) with `last_checkpoint`. A configuration mistake found before any training step,
in a run dir this run created, removes that dir instead: typos leave nothing under `logs/runs/`
or in a sweep folder.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from types import TracebackType
from typing import Any

from omegaconf import DictConfig

from headlab.data.files import absolute_file_paths, absolute_path
from headlab.data.tokenizer import is_hf_tokenizer_file
from headlab.errors import HeadlabError
from headlab.lit.signals import RunInterrupted
from headlab.tasks.history import record_segment
from headlab.tasks.rank import is_rank_zero
from headlab.tasks.summary import run_facts
from headlab.store import RunDir, remove_interrupted_writes
from headlab.store.faults import StorageError, as_storage_error
from headlab.store.run_info import code_commit, config_digest, job_override_list, job_overrides, swept_values
from headlab.store.run_dir import HYDRA_DIR, LOCK_FILE, TRAIN_LOG

log = logging.getLogger("headlab.train")

# What Hydra writes into a run dir before train() starts, and train()'s lock.
_HYDRA_STARTUP = {HYDRA_DIR, TRAIN_LOG, LOCK_FILE}


def start_dir() -> str:
    """The directory the command was started in (Hydra's runtime.cwd; Hydra never changes it here)."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return str(HydraConfig.get().runtime.cwd)
    return os.getcwd()


def absolute_data_paths(cfg: DictConfig) -> dict[str, str]:
    """Rewrite `cfg.data.files`' relative paths as absolute ones (against `start_dir()`), so the run's
    config and summary name its data wherever the run folder is read from, or moved to, later. Returns
    `{key: absolute path}` for each path rewritten (`headlab.tasks.history` writes them into the saved config)."""
    data = cfg.get("data")
    tokenizer = data.get("tokenizer") if data is not None else None
    if is_hf_tokenizer_file(tokenizer) and (absolute := absolute_path(tokenizer, start_dir())) is not None:
        data.tokenizer = absolute  # a tokenizer.json travels too
    files = data.get("files") if data is not None else None
    if files is None:
        return {}
    changed = absolute_file_paths(files, start_dir())
    for key, value in changed.items():
        files[key] = value
    return changed


class RunRecord:
    def __init__(self, cfg: DictConfig, run: RunDir) -> None:
        self.cfg, self.run = cfg, run
        run_dir = run.path
        self.fresh = not run_dir.exists() or {p.name for p in run_dir.iterdir()} <= _HYDRA_STARTUP
        run_dir.mkdir(parents=True, exist_ok=True)
        # the id every table row carries: chosen once, at the first start, so a moved run dir still resumes
        self.run_id = str(run.summary.get("run_id") or run_dir.name)
        self.summary: dict[str, Any] = {}
        self.trainer: Any = None
        self._started = time.perf_counter()

    def __enter__(self) -> "RunRecord":
        return self

    def start(self, resume: Any) -> None:
        """Status "running", the config segment of this start, and where a resume continues from."""
        previous = self.run.summary.get("status")
        if is_rank_zero():  # under DDP the other ranks share this dir: one record, written once
            self._clean_interrupted_writes()
            record_segment(self.run, self.cfg, resume.step if resume else 0, job_override_list())
        self.summary = {"status": "running", "run_id": self.run_id, "run_dir": str(self.run.path.resolve()),
                        "start_dir": start_dir(),
                        "config_digest": config_digest(self.cfg), "overrides": job_overrides(),
                        "swept": swept_values(self.cfg), "config_history": self.run.segment_infos(),
                        "git_commit": code_commit()}
        if resume:
            self.summary["resumed_from"] = {"step": resume.step, "previous_status": previous}
        self._write()

    def complete(self, results: dict[str, Any]) -> None:
        self.summary.update(results, status="completed")

    def __exit__(self, kind: type | None, err: BaseException | None, tb: TracebackType | None) -> None:
        if not is_rank_zero():
            return
        refused = _refused_write(err, self.run)  # disk full, a file-size limit, ...: one line, not a traceback
        converted = refused if refused is not None and refused is not err else None
        err = converted or err
        refused = isinstance(err, HeadlabError) and self._before_training()
        if refused and self.fresh:  # a mistake before the first step where no run was (a resume of a missing folder too)
            self._remove_run_dir()  # leave nothing behind
        elif refused and not self.summary:  # a refused resume of a folder of other files: take this start's files away
            self._remove_startup_files()
        elif self.summary:  # else an error before start() (a refused resume): the run's record stays as it was
            self._finish(err)
        if converted is not None:
            raise converted

    def _finish(self, err: BaseException | None) -> None:
        if err is not None:
            self.summary.update(_outcome(err))
        self.summary["last_checkpoint"] = last_checkpoint_text(self.run)
        self.summary.update(run_facts(self.trainer), wall_s=round(time.perf_counter() - self._started, 3))
        last = self.summary.get("last")
        if isinstance(last, dict) and "final_roles" in self.summary:
            last["roles"] = self.summary["final_roles"]
            if "final_task_roles" in self.summary:
                last["task_roles"] = self.summary["final_task_roles"]
        try:
            self._write()
        except StorageError as failed:  # the fault that stopped the run may refuse this write too
            log.error("%s (the run's status %r is not recorded)", failed, self.summary.get("status"))

    def _clean_interrupted_writes(self) -> None:
        """The temporary files of writes a kill cut short (`.last.ckpt.*.tmp.ckpt`, a table part's): this
        process holds the run-dir lock, so no write of another is in progress."""
        removed = remove_interrupted_writes(self.run.path)
        if removed:
            log.warning("%s: removed %d temporary file(s) of writes cut short by an earlier kill: %s", self.run.path,
                        len(removed), ", ".join(self.run.relative(p) for p in removed))

    def _write(self) -> None:
        if is_rank_zero():
            self.run.write_summary(self.summary)

    def _before_training(self) -> bool:
        return (self.trainer is None or self.trainer.global_step == 0) and not self.run.checkpoints_dir.exists()

    def _remove_startup_files(self) -> None:
        from headlab.tasks.lock import entries_before_start

        known, before = entries_before_start(self.run.path)
        if not known or before is None or self.run.has_summary:
            return
        for name in _HYDRA_STARTUP - before:
            path = self.run.path / name
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
        log.debug("%s: removed this start's %s", self.run.path, ", ".join(sorted(_HYDRA_STARTUP - before)))

    def _remove_run_dir(self) -> None:
        # Hydra's train.log handler may still hold its file open: unlinking it is fine on POSIX
        shutil.rmtree(self.run.path, ignore_errors=True)
        log.debug("removed %s: the run failed its config check", self.run.path)


def _refused_write(err: BaseException | None, run: RunDir) -> StorageError | None:
    """`err` as a StorageError when it is the machine refusing a write (naming the file it names, else the run dir)."""
    if not isinstance(err, (OSError, RuntimeError, StorageError)):
        return None
    return as_storage_error(err, getattr(err, "filename", None) or run.path)


def _outcome(err: BaseException) -> dict[str, Any]:
    if isinstance(err, RunInterrupted):
        return {"status": "interrupted", "error": str(err), "signal": err.signal_name}
    if type(err).__name__ == "NonFiniteLossError":
        return {"status": "diverged", "error": str(err), "diverged_step": getattr(err, "step", None)}
    status = "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"
    return {"status": status, "error": str(err) or type(err).__name__}


def last_checkpoint_text(run: RunDir) -> str | None:
    """The run's `checkpoints/last.ckpt` (where `resume=true` continues) as summary.json records it (a
    string), or None before the first one."""
    last = run.existing_last_checkpoint()
    return str(last) if last is not None else None
