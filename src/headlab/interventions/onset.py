"""When a head became important: the first step from which it keeps more than an equal share.

Raw importance is not comparable across training steps: early in training the loss, hence every
gate gradient, is large for all heads at once. So each step's importance is turned into SHARES
(a head's positive importance over the sum of all heads' at that step) and a head counts as
important at a step when its share exceeds an equal split, 1 / number of heads. Its onset is the
first step from which that holds up to the last step measured: a head that crosses the bar and
falls back gets the later crossing; one below the bar at the last step has no onset.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def importance_shares(values: np.ndarray) -> np.ndarray:
    """`[step, head]` importance -> each head's share of the step's positive total (NaN where it is 0).

    >>> importance_shares(np.array([[1.0, 3.0], [-1.0, 2.0], [0.0, 0.0]])).tolist()
    [[0.25, 0.75], [0.0, 1.0], [nan, nan]]
    """
    positive = np.clip(np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0), 0.0, None)
    total = positive.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, positive / total, np.nan)


def importance_onset(steps: Sequence[int], shares: Sequence[float], bar: float) -> int | None:
    """First step from which `shares` (ordered by `steps`) stay above `bar`; None when the last one
    is not above it (NaN counts as not above).

    >>> importance_onset([0, 10, 20, 30], [0.3, 0.1, 0.4, 0.5], bar=0.25)
    20
    >>> importance_onset([0, 10, 20], [0.1, 0.6, 0.2], bar=0.25) is None  # important at 10, not held
    True
    """
    order = np.argsort(np.asarray(steps), kind="stable")
    s, v = np.asarray(steps)[order], np.asarray(shares, dtype=np.float64)[order]
    if s.size == 0:
        return None
    above = np.nan_to_num(v, nan=-np.inf) > bar
    if not above[-1]:
        return None
    below = np.flatnonzero(~above)
    return int(s[0 if below.size == 0 else int(below[-1]) + 1])
