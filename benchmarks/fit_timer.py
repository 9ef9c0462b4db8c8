"""`FitTimer`: the wall time of `trainer.fit`, measured from inside by a callback.

Added to a composed run config (`callbacks.bench_fit_timer`) by the overhead arm. It starts at
the callbacks' `setup` and stops at their `teardown`, which bracket the training loop, every
validation and every `on_fit_end` (the head-metrics figures included); the JSON file it writes
is how the arm reads the time back, since `train(cfg)` builds the callback itself.
"""

from __future__ import annotations

import time
from pathlib import Path

import lightning as L

from headlab.store import atomic_write_json


class FitTimer(L.Callback):
    """Writes `{"fit_s": seconds}` to `path` when fit tears down."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = Path(path)
        self._t0: float | None = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage == "fit":
            self._t0 = time.perf_counter()

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage == "fit" and self._t0 is not None:
            atomic_write_json(self.path, {"fit_s": time.perf_counter() - self._t0})
            self._t0 = None
