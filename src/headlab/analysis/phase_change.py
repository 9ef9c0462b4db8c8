"""When a trajectory changes level: the onset of an induction head, the loss drop, the ICL jump.

A fixed threshold alone dates a rise by where the curve happens to cross it, so a head that
saturates at 0.45 "never forms" and one at 0.95 "forms early". The onset here is the least-squares
single change-point in the mean (the first split of binary segmentation, the "l2" cost of ruptures):
the split of the trajectory into a before and an after segment, each at its own constant level,
that leaves the smallest squared error. For a sharp sigmoidal rise it is the step at the rise's
midpoint. A split counts only if the level moves by at least `min_change` in the stated direction,
so a flat or noisy trajectory has no onset (None).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from headlab.errors import DataError


def change_point(values: Sequence[float]) -> tuple[int, float]:
    """(k, after - before): values[:k] and values[k:] at their own means leave the least squared error."""
    y = np.asarray(values, dtype=np.float64)
    if y.ndim != 1 or y.size < 2 or not np.isfinite(y).all():
        raise DataError("trajectory", f"expected at least 2 finite values, got {y.tolist()!r}")
    n = y.size
    k = np.arange(1, n)
    csum, csq = np.cumsum(y), np.cumsum(y * y)
    left_sse = csq[k - 1] - csum[k - 1] ** 2 / k
    right_sum, right_sq = csum[-1] - csum[k - 1], csq[-1] - csq[k - 1]
    right_sse = right_sq - right_sum ** 2 / (n - k)
    best = int(np.argmin(left_sse + right_sse)) + 1
    return best, float(y[best:].mean() - y[:best].mean())


def onset_step(steps: Sequence[int], values: Sequence[float], min_change: float, direction: str = "up") -> int | None:
    """The step at which `values` moves to a new level (`direction` up or down by >= min_change), else None."""
    if len(steps) != len(values):
        raise DataError("trajectory", f"{len(steps)} steps for {len(values)} values")
    if direction not in ("up", "down"):
        raise DataError("trajectory", f"direction must be up or down, got {direction!r}")
    k, change = change_point(values)
    moved = change if direction == "up" else -change
    return int(steps[k]) if moved >= min_change else None
