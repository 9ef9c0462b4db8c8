"""Checkpoints that survive preemption: atomic, safely loaded, `last.ckpt` always the newest state.

- `AtomicCheckpointIO`: every checkpoint is written to a temporary file beside its target and
  renamed over it, so a SIGKILL mid-save leaves the previous `last.ckpt` intact; every load uses
  `torch.load(..., weights_only=True)` (tensors and plain containers only, never code).
- `RunCheckpoint`: the ONE writer of `checkpoints/last.ckpt`: at every training-epoch end (after
  the epoch-end head measurement and after `ModelCheckpoint` has chosen the best, so the file
  records both and a resume never re-measures), every `every_n_train_steps` optimiser steps, and
  when SIGTERM / SIGINT arrives during fit (see `headlab.lit.signals`). `ModelCheckpoint` keeps only
  the best (`save_last: false`): its own `save_last` with a `monitor` rewrites last.ckpt only when a
  new best is saved (Lightning 2.x), so a run whose metric plateaus would resume from a stale step.
  With `keep_every_n_train_steps=N` it also keeps `checkpoints/step{step:06d}.ckpt` every N steps
  (never overwritten, never read by a resume), so `headlab-importance RUN checkpoint=all` can
  measure importance over training.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Optional

import lightning as L
import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch.callbacks import Checkpoint, ModelCheckpoint

from headlab.errors import ConfigError, HeadlabError
from headlab.lit.signals import RunInterrupted, RunSignals
from headlab.store import atomic_path
from headlab.store.checkpoint_file import CheckpointError, load_checkpoint, saved_model_config  # noqa: F401  (lit's names for them)
from headlab.store.run_dir import CHECKPOINTS_DIR, step_checkpoint_name
from headlab.store.run_dir import LAST_CHECKPOINT as LAST

log = logging.getLogger("headlab.checkpoint")

__all__ = ["AtomicCheckpointIO", "CheckpointError", "RunCheckpoint", "RunInterrupted", "load_checkpoint",
           "saved_model_config"]


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning checkpoint IO: atomic rename on save, `weights_only=True` on load."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Optional[Any] = None) -> None:
        if storage_options is not None:
            raise TypeError("AtomicCheckpointIO takes no storage_options")
        with atomic_path(path) as tmp:
            torch.save(checkpoint, tmp)

    def load_checkpoint(self, path: Any, map_location: Optional[Callable] = None, weights_only: Optional[bool] = None) -> dict[str, Any]:
        return load_checkpoint(path)


def rebase_best_tracking(state: dict[str, Any], dirpath: Path) -> bool:
    """Point a `ModelCheckpoint` state saved in another folder at the same files in `dirpath`; True when done.

    The state records its folder's absolute path, and Lightning keeps the best score and top-k only
    when that path equals the callback's: a moved run would forget its best score, save the next
    validation as a new best beside the old file and end with another best step. Rebased only when
    the recorded best file is in `dirpath` (a copy without it starts its tracking afresh, as before).
    """
    old = state.get("dirpath")
    best = state.get("best_model_path")
    if not old or Path(old).resolve() == dirpath.resolve() or not best or not (dirpath / Path(best).name).is_file():
        return False

    def moved(path: Any) -> Any:
        return str(dirpath / Path(path).name) if path and Path(path).parent == Path(old) else path

    for key in ("best_model_path", "kth_best_model_path", "last_model_path"):
        if key in state:
            state[key] = moved(state[key])
    if isinstance(state.get("best_k_models"), dict):
        state["best_k_models"] = {moved(path): score for path, score in state["best_k_models"].items()}
    state["dirpath"] = str(dirpath)
    return True


PENDING_ROW = "headlab_row_after_save"


def _row_after_save(trainer: L.Trainer, epoch_end: bool) -> dict[str, Any] | None:
    """The logger row Lightning writes for this step only after the hook that saves last.ckpt: a step's train
    row (train/loss) after `on_train_batch_end`, an epoch's (train/acc) after `on_train_epoch_end`. A resume never
    runs that step or epoch end again, so a stop right after the save (SIGTERM: always; SIGKILL: a kill in that
    millisecond) lost the row. Computed as Lightning's logger connector computes it; None when none is due."""
    from lightning.fabric.utilities.apply_func import convert_tensors_to_scalars

    connector, results = trainer._logger_connector, trainer._results  # noqa: SLF001 - no public access to the due row
    loop = trainer.fit_loop.epoch_loop
    if not trainer.loggers or results is None:
        return None
    if epoch_end:
        step = loop._batches_that_stepped - 1  # noqa: SLF001 - as Lightning's update_train_epoch_metrics steps back
    else:
        accumulating = trainer.fit_loop._should_accumulate() and trainer.lightning_module.automatic_optimization  # noqa: SLF001
        if accumulating or not connector.should_update_logs:
            return None
        step = loop._batches_that_stepped  # noqa: SLF001
    metrics = convert_tensors_to_scalars(results.metrics(not epoch_end)["log"])
    if not metrics:
        return None
    if "step" in metrics:
        step = int(metrics.pop("step"))
    else:
        metrics.setdefault("epoch", trainer.current_epoch)
    return {"step": int(step), "metrics": {k: float(v) if isinstance(v, float) else v for k, v in metrics.items()}}


class RunCheckpoint(Checkpoint):
    """`last.ckpt` at every training-epoch end, every `every_n_train_steps` steps, and on SIGTERM / SIGINT.

    A `Checkpoint` subclass, so Lightning runs its hooks after all other callbacks (the head
    measurement of a step or epoch end is in the file); it must also come after every
    `ModelCheckpoint`, so last.ckpt holds the best-model bookkeeping of its own epoch.

    Args:
        dirpath: folder of `last.ckpt` (default: `<trainer.default_root_dir>/checkpoints`).
        every_n_train_steps: null = epoch ends only; N >= 1 = also after every N-th optimiser step,
            so a kill loses at most N steps.
        handle_signals: turn SIGTERM / SIGINT during training into "checkpoint at the next batch
            end, then stop" (otherwise Lightning's own handling stays).
        keep_every_n_train_steps: null = keep nothing but last.ckpt; N >= 1 = also write
            `step{step:06d}.ckpt` after every N-th optimiser step and keep it (a history of the
            weights for analysis after training; resume still reads only last.ckpt).
    """

    def __init__(self, dirpath: str | None = None, every_n_train_steps: int | None = None, handle_signals: bool = True,
                 keep_every_n_train_steps: int | None = None) -> None:
        super().__init__()
        for key, value in (("every_n_train_steps", every_n_train_steps), ("keep_every_n_train_steps", keep_every_n_train_steps)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"callbacks.checkpoint.{key}", value,
                                  "null (off) or an integer >= 1")
        self.dirpath = Path(dirpath) if dirpath else None
        self.every_n_train_steps = every_n_train_steps
        self.keep_every_n_train_steps = keep_every_n_train_steps
        self.handle_signals = handle_signals
        self.signals: RunSignals | None = None  # the run's handlers (`use_signals`), else its own during fit
        self._owns_signals = False
        self.saved_step: int | None = None
        self._pending_row: dict[str, Any] | None = None  # written into the checkpoint being saved
        self._restored_row: dict[str, Any] | None = None  # read from the checkpoint resumed from

    @property
    def last_path(self) -> Path:
        assert self.dirpath is not None
        return self.dirpath / LAST

    @property
    def stop_requested(self) -> str | None:
        """The name of the signal that asked the run to stop (None: none arrived)."""
        return self.signals.requested if self.signals is not None else None

    def use_signals(self, signals: RunSignals) -> None:
        """Share the run's `RunSignals` (installed for the whole of `train()`), instead of installing
        handlers of its own for the duration of fit."""
        self.signals, self._owns_signals = signals, False

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.dirpath is None:
            self.dirpath = Path(trainer.default_root_dir) / CHECKPOINTS_DIR
        callbacks = list(trainer.callbacks)
        if any(isinstance(c, ModelCheckpoint) for c in callbacks[callbacks.index(self) + 1:]):
            raise HeadlabError("RunCheckpoint must come after every ModelCheckpoint in the callbacks, so last.ckpt "
                               "records the best checkpoint chosen at its own epoch end")

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        """A moved or copied run: every `ModelCheckpoint`'s saved state is made to name this folder (Lightning
        runs every `on_load_checkpoint` before any callback's `load_state_dict`)."""
        states = checkpoint.get("callbacks") or {}
        for callback in trainer.checkpoint_callbacks:
            state = states.get(callback.state_key) if isinstance(callback, ModelCheckpoint) else None
            if isinstance(state, dict) and callback.dirpath:
                rebase_best_tracking(state, Path(callback.dirpath))
        row = checkpoint.get(PENDING_ROW)
        self._restored_row = row if isinstance(row, dict) else None

    def _log_pending_row(self, trainer: L.Trainer) -> None:
        """The row the checkpoint's own step logged after the checkpoint was written (see `_row_after_save`), logged
        now: Lightning does not run that step again. When the earlier process did write it, metrics.csv has it twice
        with equal cells, and the resume's merge (`headlab.tasks.csv_metrics`) keeps one."""
        row, self._restored_row = self._restored_row, None
        if row is None or not trainer.loggers:
            return
        for logger in trainer.loggers:
            logger.log_metrics(metrics=dict(row["metrics"]), step=int(row["step"]))
            logger.save()

    def _take_signals(self) -> None:
        # Lightning registers its SIGTERM notifier just before training starts: take over again here.
        if not self.handle_signals:
            return
        if self.signals is None:
            self.signals, self._owns_signals = RunSignals(), True
        self.signals.install()
        self.signals.deferred = True

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int) -> None:
        # After an epoch's last batch the stop and the save wait for the epoch end (validation, then the epoch-end
        # save, a few hooks later): a checkpoint from between the two resumed inexactly in Lightning 2.6 (the epoch's
        # validation and best checkpoint skipped, and a later mid-epoch resume trained extra batches: 23 steps of 20).
        if batch_idx + 1 < trainer.num_training_batches:
            self._stop_if_requested(trainer, epoch_end=False)
            if self.every_n_train_steps and trainer.global_step % self.every_n_train_steps == 0:
                self._save(trainer, epoch_end=False)
        if self.keep_every_n_train_steps and trainer.global_step % self.keep_every_n_train_steps == 0:
            self._keep(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._stop_if_requested(trainer, epoch_end=True)  # a signal during the epoch-end validation
        self._save(trainer, epoch_end=True)

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        if self._pending_row is not None:
            checkpoint[PENDING_ROW] = self._pending_row

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._log_pending_row(trainer)
        self._take_signals()
        if self.stop_requested is not None:  # arrived during the setup: no step has run since the checkpoint
            last = self.last_path if self.last_path.is_file() else None
            raise RunInterrupted(self.stop_requested, int(trainer.global_step), str(last) if last else None)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._release_signals()

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self._release_signals()

    def _stop_if_requested(self, trainer: L.Trainer, epoch_end: bool) -> None:
        if self.stop_requested is not None:
            self._save(trainer, epoch_end)
            raise RunInterrupted(self.stop_requested, int(trainer.global_step), str(self.last_path))

    def _release_signals(self) -> None:
        if self.signals is None or not self._owns_signals:  # the run's handlers stay deferred to train()'s end
            return
        self.signals.deferred = False
        if self._owns_signals:
            self.signals.__exit__()
            self.signals, self._owns_signals = None, False

    def kept_path(self, step: int) -> Path:
        """Where the kept checkpoint of optimiser step `step` goes."""
        assert self.dirpath is not None
        return self.dirpath / step_checkpoint_name(step)

    def _keep(self, trainer: L.Trainer) -> None:
        # through the trainer's checkpoint IO: AtomicCheckpointIO in headlab-train, so atomic too
        trainer.save_checkpoint(self.kept_path(int(trainer.global_step)), weights_only=False)

    def _save(self, trainer: L.Trainer, epoch_end: bool) -> None:
        for logger in trainer.loggers:  # rows logged up to this step reach metrics.csv before the checkpoint
            logger.save()  # says they did: a resume from it never re-logs them, so a kill must not lose them
        self._pending_row = _row_after_save(trainer, epoch_end)
        try:
            trainer.save_checkpoint(self.last_path, weights_only=False)
        finally:
            self._pending_row = None
        self.saved_step = int(trainer.global_step)
