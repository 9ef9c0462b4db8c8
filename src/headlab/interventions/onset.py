"""When a head became important: the first step from which its importance stays high.

"High" is relative to the head itself: at least `share` (default half) of the largest value its
trajectory reaches. A head whose importance only flickers above that bar before the end gets the
step of the last crossing, not the first; a head that never rises above 0, or that falls below
the bar again by the last step, has no onset.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

ONSET_SHARE = 0.5


def importance_onset(steps: Sequence[int], values: Sequence[float], share: float = ONSET_SHARE) -> int | None:
    """First step from which `values` (ordered by `steps`) stay >= `share` * their maximum; None
    when the maximum is not positive, the last value is below the bar (the head lost its
    importance), or there are no finite values.

    >>> importance_onset([0, 10, 20, 30, 40], [0.0, 0.3, 0.1, 0.6, 0.5])
    30
    >>> importance_onset([0, 10], [-0.1, 0.0]) is None
    True
    >>> importance_onset([0, 10, 20], [0.1, 0.8, 0.2]) is None  # important at step 10, not held
    True
    """
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1]; got {share}")
    order = np.argsort(np.asarray(steps), kind="stable")
    s, v = np.asarray(steps)[order], np.asarray(values, dtype=np.float64)[order]
    keep = np.isfinite(v)
    s, v = s[keep], v[keep]
    if v.size == 0 or v.max() <= 0.0:
        return None
    below = np.flatnonzero(v < share * v.max())
    first = 0 if below.size == 0 else int(below[-1]) + 1
    return int(s[first]) if first < s.size else None
