"""When a trajectory changes level: the onset of an induction head, the loss drop, the ICL jump.

`rise_start` dates the START of a rise: the first measurement above the recent baseline (the
mean of up to `window` measurements before it) by more than `k_sd` standard errors, with every
measurement after it above the same bar until the score has risen `min_rise` above that baseline
(the head formed), and at least the next `confirm`. It reads nothing after that, so a run that
goes on longer after the rise cannot move it. `onset_step` (below) is the older
midpoint of the jump, kept beside it.

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
    """The midpoint step at which `values` moves to a new level (`direction` up or down by >= min_change), else None.

    It depends on the whole trajectory: a longer plateau after the rise moves the split."""
    _checked(steps, values, direction)
    k, change = change_point(values)
    moved = change if direction == "up" else -change
    return int(steps[k]) if moved >= min_change else None


RISE_WINDOW = 6        # measurements before a candidate that make its baseline: the recent level, not step 0's
RISE_MIN_BASELINE = 4  # measurements a baseline needs before any candidate is judged
RISE_K_SD = 3.0        # how many standard errors above the baseline the first risen measurement lies
RISE_CONFIRM = 2       # later measurements that must stay above the same bar (one noisy point is no rise)
RISE_SD_FLOOR = 0.02   # x min_rise: the bar for a noiseless baseline (spread 0), so a rounding tick is no rise


def rise_start(steps: Sequence[int], values: Sequence[float], min_rise: float, direction: str = "up",
               k_sd: float = RISE_K_SD, window: int = RISE_WINDOW, confirm: int = RISE_CONFIRM) -> int | None:
    """The step at which `values` starts to rise (fall, `direction` down) for good, else None.

    Causal: candidate i's baseline is values[i-window:i], the recent level (a loss that drifts down
    while it learns the unigrams has moved on from step 0's); values[i], ..., values[i+confirm]
    must all lie above its mean by more than max(k_sd x the standard error of one new measurement,
    RISE_SD_FLOOR x min_rise), and so must every measurement from i until the trajectory reaches
    min_rise above that mean (a bump that falls back before the head forms, or a drift that never
    becomes a rise, is skipped). Nothing after that point is read.

    >>> rise_start([0, 10, 20, 30, 40, 50, 60, 70], [0.0, 0.01, 0.0, 0.01, 0.0, 0.2, 0.6, 0.9], min_rise=0.5)
    50
    """
    y = _checked(steps, values, direction)
    if not (min_rise > 0 and k_sd >= 0 and window >= RISE_MIN_BASELINE and confirm >= 0):
        raise DataError("rise_start", f"min_rise={min_rise}, k_sd={k_sd}, window={window}, confirm={confirm}: "
                        f"expected min_rise > 0, k_sd >= 0, window >= {RISE_MIN_BASELINE}, confirm >= 0")
    y = -y if direction == "down" else y
    floor = RISE_SD_FLOOR * min_rise
    for i in range(RISE_MIN_BASELINE, y.size - confirm):
        level, spread = _baseline(y[max(0, i - window):i])
        risen = np.flatnonzero(y[i:] - level >= min_rise)
        if risen.size == 0:
            continue
        end = max(confirm, int(risen[0]))  # held from i until formed, and at least `confirm` after i
        held = y[i:i + end + 1]
        if held.size == end + 1 and (held > level + max(k_sd * spread, floor)).all():
            return int(steps[i])
    return None


def _baseline(y: np.ndarray) -> tuple[float, float]:
    """The baseline's level and the standard error of one new measurement about it (sd x sqrt(1 + 1/n)).
    A level, not a line: a line through a few noisy points, extended, dated noise as a rise in 6-12 %
    of flat synthetic runs (sd 0.003, 50-step grid); the level in none of 200."""
    return float(y.mean()), float(y.std(ddof=1) * np.sqrt(1 + 1 / y.size))


def _checked(steps: Sequence[int], values: Sequence[float], direction: str) -> np.ndarray:
    if len(steps) != len(values):
        raise DataError("trajectory", f"{len(steps)} steps for {len(values)} values")
    if direction not in ("up", "down"):
        raise DataError("trajectory", f"direction must be up or down, got {direction!r}")
    y = np.asarray(values, dtype=np.float64)
    if y.ndim != 1 or not np.isfinite(y).all():
        raise DataError("trajectory", f"expected finite values, got {y.tolist()!r}")
    return y
