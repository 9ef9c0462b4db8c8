"""Learning-rate schedules as multiplicative factors of the base lr, one value per optimiser step.

Warm-up matters for this project: the founding article argues that the first few hundred steps
decide which head takes which role, and warm-up changes how hard those steps push.
"""

from __future__ import annotations

import math
from typing import Any

from headlab.errors import ConfigError

SCHEDULES = ("cosine", "linear", "constant")


def resolve_warmup_steps(total_steps: int, warmup_steps: int | None, warmup_ratio: float) -> int:
    """`warmup_steps` wins when given; otherwise a fraction of the total."""
    if warmup_steps is not None:
        if warmup_steps < 0:
            raise ConfigError("optim.warmup_steps", warmup_steps, "an integer >= 0 or null")
        return int(warmup_steps)
    if not 0.0 <= warmup_ratio < 1.0:
        raise ConfigError("optim.warmup_ratio", warmup_ratio, "a fraction in [0, 1)")
    return int(round(total_steps * warmup_ratio))


def lr_factor(step: int, total_steps: int, warmup_steps: int, schedule: str, min_ratio: float = 0.0) -> float:
    """Factor of the base lr at optimiser `step` (0-based): linear warm-up, then `schedule`.

    >>> lr_factor(0, 100, 10, "cosine"), lr_factor(10, 100, 10, "cosine"), lr_factor(100, 100, 10, "cosine")
    (0.1, 1.0, 0.0)
    >>> lr_factor(55, 100, 10, "linear", min_ratio=0.1)
    0.55
    """
    if schedule not in SCHEDULES:
        raise ConfigError("optim.schedule", schedule, f"one of {', '.join(SCHEDULES)}")
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    decay_steps = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / decay_steps)
    shape = 0.5 * (1.0 + math.cos(math.pi * progress)) if schedule == "cosine" else 1.0 - progress
    return min_ratio + (1.0 - min_ratio) * shape


class WarmupSchedule:
    """The lr scheduler factory `optim.scheduler` instantiates: linear warm-up, then `schedule`.

    Built from the config before any data is loaded (so a bad `optim.schedule` fails at once) and
    called by the module once the number of optimiser steps is known:
    `WarmupSchedule(...)(optimizer, total_steps) -> LambdaLR`, stepped after every optimiser step.
    """

    def __init__(self, schedule: str = "cosine", warmup_steps: int | None = None, warmup_ratio: float = 0.05,
                 min_lr_ratio: float = 0.0) -> None:
        if schedule not in SCHEDULES:
            raise ConfigError("optim.schedule", schedule, f"one of {', '.join(SCHEDULES)}")
        resolve_warmup_steps(1, warmup_steps, warmup_ratio)  # checks both
        self.schedule, self.warmup_steps, self.warmup_ratio, self.min_lr_ratio = schedule, warmup_steps, warmup_ratio, min_lr_ratio

    def __call__(self, optimizer: Any, total_steps: int) -> Any:
        from torch.optim.lr_scheduler import LambdaLR

        warmup = resolve_warmup_steps(total_steps, self.warmup_steps, self.warmup_ratio)
        schedule, min_ratio = self.schedule, self.min_lr_ratio
        return LambdaLR(optimizer, lambda step: lr_factor(step, total_steps, warmup, schedule, min_ratio))
