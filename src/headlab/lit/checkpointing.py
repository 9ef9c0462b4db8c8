"""Checkpoints that survive preemption: atomic, safely loaded, saved on SIGTERM / Ctrl-C.

- `AtomicCheckpointIO`: every checkpoint is written to a temporary file beside its target and
  renamed over it, so a SIGKILL mid-save leaves the previous `last.ckpt` intact; every load uses
  `torch.load(..., weights_only=True)` (tensors and plain containers only, never code).
- `RunCheckpoint`: writes `checkpoints/last.ckpt` every `every_n_train_steps` optimiser steps
  (for mid-epoch resume) and, when SIGTERM or SIGINT arrives during fit, finishes the current
  training batch, writes `last.ckpt` and stops the run with `RunInterrupted`. Lightning's own
  SIGTERM handling (`trainer.received_sigterm`) raises `SIGTERMException` at the next batch
  boundary *without* saving anything, and may stop in the middle of a validation loop; this
  callback replaces it for the training loop so a stop always lands on a training-batch
  boundary, where a checkpoint resumes exactly. A second signal stops at once (no checkpoint).
  SIGUSR1 (Lightning's SLURM auto-requeue signal) is left to Lightning.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path
from typing import Any, Callable, Optional

import lightning as L
import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from headlab.errors import ConfigError, HeadlabError
from headlab.store import atomic_path

log = logging.getLogger("headlab.checkpoint")

LAST = "last.ckpt"
EXIT_CODES = {"SIGINT": 130, "SIGTERM": 143}  # the shell's 128 + signal number


class RunInterrupted(Exception):
    """A signal stopped the run; `checkpoint` is the file it can resume from (None: none written now)."""

    def __init__(self, signal_name: str, step: int | None = None, checkpoint: str | None = None) -> None:
        self.signal_name, self.step, self.checkpoint = signal_name, step, checkpoint
        where = f" at step {step}" if step is not None else ""
        saved = f"; checkpoint saved to {checkpoint}" if checkpoint else ""
        super().__init__(f"interrupted by {signal_name}{where}{saved}")

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.signal_name, 1)


class CheckpointError(HeadlabError):
    """A checkpoint cannot be used (unreadable, truncated, or from a different model)."""

    def __init__(self, path: Any, problem: str) -> None:
        self.path, self.problem = str(path), problem
        super().__init__(f"checkpoint {path}: {problem}")


def load_checkpoint(path: str | os.PathLike, mmap: bool = False) -> dict[str, Any]:
    """`torch.load(path, weights_only=True)` on CPU; a damaged file raises `CheckpointError`.

    `mmap=True` maps the tensors instead of reading them: for a caller that only looks at the
    metadata (hyper-parameters, step) of a checkpoint that is loaded in full later anyway."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except FileNotFoundError:
        raise CheckpointError(path, "file not found") from None
    except Exception as err:  # truncated zip, foreign pickle needing code, ...
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(path, f"cannot be read safely (truncated, or not a headlab checkpoint): {first}") from None
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise CheckpointError(path, "not a Lightning checkpoint (no 'state_dict')")
    return checkpoint


def run_last_checkpoint(run_dir: str | os.PathLike) -> Path:
    """Where a run keeps the checkpoint `resume=true` continues from."""
    return Path(run_dir) / "checkpoints" / LAST


def saved_model_config(checkpoint: dict[str, Any], path: Any) -> dict[str, Any]:
    """The `ModelConfig` fields headlab stores in every checkpoint's hyper-parameters."""
    fields = (checkpoint.get("hyper_parameters") or {}).get("model_config")
    if not isinstance(fields, dict):
        raise CheckpointError(path, "has no headlab model_config: not written by headlab-train")
    return fields


def load_network(path: str | os.PathLike) -> torch.nn.Module:
    """The trained `HeadlabClassifier` of a checkpoint, in eval mode: for analysis after a run
    (the checkpoint stores its `ModelConfig`, so nothing else is needed)."""
    from headlab.model import HeadlabClassifier, ModelConfig

    checkpoint = load_checkpoint(path)
    net = HeadlabClassifier(ModelConfig(**saved_model_config(checkpoint, path)))
    prefix = "net."
    state = {k[len(prefix):]: v for k, v in checkpoint["state_dict"].items() if k.startswith(prefix)}
    net.load_state_dict(state)
    return net.eval()


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning checkpoint IO: atomic rename on save, `weights_only=True` on load."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Optional[Any] = None) -> None:
        if storage_options is not None:
            raise TypeError("AtomicCheckpointIO takes no storage_options")
        with atomic_path(path) as tmp:
            torch.save(checkpoint, tmp)

    def load_checkpoint(self, path: Any, map_location: Optional[Callable] = None, weights_only: Optional[bool] = None) -> dict[str, Any]:
        return load_checkpoint(path)


class RunCheckpoint(L.Callback):
    """`last.ckpt` every `every_n_train_steps` steps and on SIGTERM / SIGINT (then stop).

    Args:
        dirpath: folder of `last.ckpt` (default: `<trainer.default_root_dir>/checkpoints`).
        every_n_train_steps: null = only the epoch-end checkpoints of `ModelCheckpoint`; N >= 1 =
            also after every N-th optimiser step, so a kill loses at most N steps.
        handle_signals: turn SIGTERM / SIGINT into "checkpoint at the next batch end, then stop".
    """

    def __init__(self, dirpath: str | None = None, every_n_train_steps: int | None = None, handle_signals: bool = True) -> None:
        super().__init__()
        if every_n_train_steps is not None and (isinstance(every_n_train_steps, bool) or not isinstance(every_n_train_steps, int)
                                                or every_n_train_steps < 1):
            raise ConfigError("callbacks.checkpoint.every_n_train_steps", every_n_train_steps,
                              "null (epoch-end checkpoints only) or an integer >= 1")
        self.dirpath = Path(dirpath) if dirpath else None
        self.every_n_train_steps = every_n_train_steps
        self.handle_signals = handle_signals
        self.stop_requested: str | None = None  # the signal's name once one arrived
        self.saved_step: int | None = None

    @property
    def last_path(self) -> Path:
        assert self.dirpath is not None
        return self.dirpath / LAST

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.dirpath is None:
            self.dirpath = Path(trainer.default_root_dir) / "checkpoints"

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Lightning registers its SIGTERM notifier just before training starts; take over here.
        # Its teardown restores the handlers that were installed before fit.
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.stop_requested is not None:  # a second signal: stop now, without a checkpoint
            raise RunInterrupted(name)
        self.stop_requested = name
        log.warning("%s received: finishing this training step, then saving %s and stopping "
                    "(send it again to stop at once)", name, self.last_path)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int) -> None:
        step = int(trainer.global_step)
        if self.stop_requested is not None:
            self._save(trainer)
            raise RunInterrupted(self.stop_requested, step, str(self.last_path))
        if self.every_n_train_steps and step % self.every_n_train_steps == 0:
            self._save(trainer)

    def _save(self, trainer: L.Trainer) -> None:
        trainer.save_checkpoint(self.last_path, weights_only=False)
        self.saved_step = int(trainer.global_step)
