"""SIGTERM / SIGINT for a whole run, one mechanism: stop with `RunInterrupted`, never lose a checkpoint.

`RunSignals` owns the handlers from the first line of `train()` to its last. While `deferred` (all of
`train()`: the setup, training and the final evaluation), a signal is only recorded and the run stops
where that is safe: `RunCheckpoint` stops at training start (no step run since the checkpoint resumed
from) or after the training batch, writing `last.ckpt`, so a stop always lands on a batch boundary
that resumes exactly. Not raised inside the setup, since a library's `except Exception` there turned
it into another error (a resume's checkpoint "cannot be read safely", Hydra's instantiation error:
exit 1 or 2 instead of 143). A second signal raises at once.
SIGUSR1 (Lightning's SLURM auto-requeue signal) is left to Lightning.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

log = logging.getLogger("headlab.signals")

EXIT_CODES = {"SIGINT": 130, "SIGTERM": 143}  # the shell's 128 + signal number
HANDLED = (signal.SIGTERM, signal.SIGINT)


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


class RunSignals:
    """Context manager: SIGTERM / SIGINT raise `RunInterrupted`, or (while `deferred`) set `requested`.

    Only the main thread can install handlers; elsewhere (a thread-based launcher) it does nothing
    and the process's own handling stays in place.
    """

    def __init__(self) -> None:
        self.requested: str | None = None  # the first signal's name, once one arrived
        self.deferred = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "RunSignals":
        self.install()
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        self._previous = {}

    def install(self) -> None:
        """(Re)install the handler: Lightning replaces SIGTERM's at fit start, so training calls this again."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in HANDLED:
            current = signal.getsignal(signum)
            if current != self._handle:
                self._previous.setdefault(signum, current)
                signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.requested is not None or not self.deferred:
            self.requested = self.requested or name
            raise RunInterrupted(name)
        self.requested = name
        log.warning("%s received: finishing this training step, then saving the checkpoint and stopping "
                    "(send it again to stop at once)", name)
