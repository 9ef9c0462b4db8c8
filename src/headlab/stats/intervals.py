"""Intervals over seeds: the statistics every sweep table and verdict shares, kept below the
packages that use them (sweep aggregation, figures, the reproduce report).

Each interval says what it resampled: `mean_ci` is Student's t over independent seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pandas as pd
from scipy import stats

from headlab.errors import ConfigError

CONFIDENCE = 0.95


@dataclass(frozen=True)
class MeanCI:
    """Mean over `n` finite values with a two-sided t-interval `[low, high]` (NaN when n < 2).

    Seeds are few (3 by default), so the interval uses Student's t with n - 1 degrees of
    freedom, not the normal 1.96: with 3 seeds the half-width is 2.48 standard errors, not 1.96.
    """

    n: int
    mean: float
    low: float
    high: float

    def columns(self, name: str) -> dict[str, float]:
        """`<name>_mean`, `<name>_ci95_low`, `<name>_ci95_high`: the table columns `format_interval` reads."""
        return {f"{name}_mean": self.mean, f"{name}_ci95_low": self.low, f"{name}_ci95_high": self.high}


def mean_ci(values: Iterable[float], confidence: float = CONFIDENCE,
            bounds: tuple[float, float] = (-math.inf, math.inf)) -> MeanCI:
    """Mean and t-interval of the finite `values` (NaN / None are dropped: a missing seed).

    `bounds` is the range the statistic can take (an accuracy's [0, 1]): with 3 seeds a
    t-interval easily reaches past it, and an "accuracy up to 1.15" helps nobody, so the
    interval is clipped to it.

    >>> c = mean_ci([0.8, 0.9, 1.0])
    >>> round(c.mean, 6), round(c.low, 4), round(c.high, 4)
    (0.9, 0.6516, 1.1484)
    >>> mean_ci([0.8, 0.9, 1.0], bounds=(0.0, 1.0)).high
    1.0
    """
    if not 0 < confidence < 1:
        raise ConfigError("confidence", confidence, "a level strictly between 0 and 1")
    x = pd.to_numeric(pd.Series(list(values), dtype="object"), errors="coerce").to_numpy(dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return MeanCI(0, math.nan, math.nan, math.nan)
    mean = float(x.mean())
    if x.size < 2:
        return MeanCI(1, mean, math.nan, math.nan)
    half = float(stats.t.ppf(0.5 + confidence / 2, df=x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    low, high = bounds
    return MeanCI(int(x.size), mean, max(mean - half, low), min(mean + half, high))
