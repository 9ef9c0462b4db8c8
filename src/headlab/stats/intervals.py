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
from scipy import special, stats

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


@dataclass(frozen=True)
class Interval:
    """An estimate with its two-sided interval and what produced it (`method`), so a report can say
    what was resampled. `se` and `df` are set for t-intervals (the p-values and power read them)."""

    estimate: float
    low: float
    high: float
    n: int
    method: str
    se: float = math.nan
    df: float = math.nan


def prediction_interval(values: Iterable[float], confidence: float = CONFIDENCE,
                        bounds: tuple[float, float] = (-math.inf, math.inf)) -> Interval:
    """Where one NEW seed's value should fall: Student's t with n - 1 df about the mean, scale
    sd sqrt(1 + 1/n) (scipy.stats.t.interval). The mean's CI shrinks with more seeds; this does not,
    so a fresh run outside the mean's CI is no surprise when it is inside this.

    >>> c = prediction_interval([1000, 1100, 1200, 1300, 1400])
    >>> round(c.low), round(c.high)
    (719, 1681)
    """
    if not 0 < confidence < 1:
        raise ConfigError("confidence", confidence, "a level strictly between 0 and 1")
    x = pd.to_numeric(pd.Series(list(values), dtype="object"), errors="coerce").to_numpy(dtype=np.float64)
    x = x[np.isfinite(x)]
    method = "t prediction interval for a new seed"
    if x.size < 2:
        return Interval(float(x.mean()) if x.size else math.nan, math.nan, math.nan, int(x.size), method)
    scale = float(x.std(ddof=1) * math.sqrt(1 + 1 / x.size))
    low, high = stats.t.interval(confidence, df=x.size - 1, loc=float(x.mean()), scale=scale)
    return Interval(float(x.mean()), max(float(low), bounds[0]), min(float(high), bounds[1]), int(x.size), method,
                    se=scale, df=float(x.size - 1))


def proportion_ci(successes: int, trials: int, confidence: float = CONFIDENCE) -> Interval:
    """Clopper-Pearson (exact) interval of `successes` of `trials` (scipy.stats.binomtest).

    0 of 48 is not "0 [0, 0]": its exact 95 % upper bound is 0.074.

    >>> c = proportion_ci(0, 48)
    >>> c.estimate, c.low, round(c.high, 3)
    (0.0, 0.0, 0.074)
    """
    if trials < 1:
        return Interval(math.nan, math.nan, math.nan, 0, "Clopper-Pearson (no trials)")
    ci = stats.binomtest(int(successes), int(trials)).proportion_ci(confidence_level=confidence, method="exact")
    return Interval(successes / trials, float(ci.low), float(ci.high), int(trials), "Clopper-Pearson exact")


def cluster_proportion_ci(successes: Iterable[int], trials: Iterable[int], confidence: float = CONFIDENCE,
                          resamples: int = 2000, seed: int = 0) -> Interval:
    """A proportion pooled over clusters (the heads of one model are one cluster, a seed is the unit):
    the envelope of the seed-cluster bootstrap (scipy.stats.bootstrap, percentile, clusters resampled)
    and the exact Clopper-Pearson interval of the pooled counts.

    The bootstrap respects that heads of one model are not independent; with few clusters it is too
    narrow, and when every cluster gives the same share it collapses to a point, which the exact
    interval never does. Taking the wider end of each keeps the interval honest in both cases.

    >>> c = cluster_proportion_ci([0, 0, 0], [16, 16, 16])
    >>> c.estimate, c.low, round(c.high, 3), c.n
    (0.0, 0.0, 0.074, 3)
    """
    k = np.asarray(list(successes), dtype=np.float64)
    n = np.asarray(list(trials), dtype=np.float64)
    keep = np.isfinite(k) & np.isfinite(n) & (n > 0)
    k, n = k[keep], n[keep]
    exact = proportion_ci(int(k.sum()), int(n.sum()), confidence)
    low, high, method = exact.low, exact.high, f"{exact.method} on pooled counts"
    if k.size >= 2 and np.ptp(k / n) > 0:
        boot = stats.bootstrap((k, n), lambda a, b: a.sum() / b.sum(), paired=True, vectorized=False,
                               confidence_level=confidence, n_resamples=resamples, method="percentile",
                               random_state=np.random.default_rng(seed))
        low, high = min(low, float(boot.confidence_interval.low)), max(high, float(boot.confidence_interval.high))
        method = f"envelope of the seed-cluster bootstrap ({k.size} seeds resampled) and {method}"
    return Interval(exact.estimate, low, high, int(k.size), method)


def paired_ci(differences: Iterable[float], confidence: float = CONFIDENCE,
              bounds: tuple[float, float] = (-math.inf, math.inf)) -> Interval:
    """Paired t-interval of per-seed differences (scipy.stats.ttest_1samp on the differences, which is
    ttest_rel). When every difference is the same the interval is NaN, never zero width: a spread of
    zero over a few seeds is not certainty.

    >>> c = paired_ci([0.01, 0.03, 0.02])
    >>> round(c.estimate, 3), round(c.low, 4), round(c.high, 4), c.df
    (0.02, -0.0048, 0.0448, 2.0)
    >>> import math; math.isnan(paired_ci([0.0, 0.0, 0.0]).high)
    True
    """
    x = np.asarray([v for v in values_of(differences)], dtype=np.float64)
    if x.size == 0:
        return Interval(math.nan, math.nan, math.nan, 0, "paired t (no pairs)")
    mean = float(x.mean())
    if x.size < 2 or float(np.ptp(x)) == 0.0:
        why = "one pair" if x.size < 2 else "no spread over the pairs"
        return Interval(mean, math.nan, math.nan, int(x.size), f"paired t (undefined: {why})")
    se = float(x.std(ddof=1) / math.sqrt(x.size))
    # = stats.ttest_1samp(x, 0).confidence_interval(confidence), without its wrapper's cost (the
    # simulation of headlab.reproduce.simulate calls this some 40,000 times)
    half = float(special.stdtrit(x.size - 1, 0.5 + confidence / 2)) * se  # stats.t.ppf, without its overhead
    ci_low, ci_high = mean - half, mean + half
    low, high = bounds
    return Interval(mean, max(float(ci_low), low), min(float(ci_high), high), int(x.size),
                    f"paired t over {x.size} seeds", se, float(x.size - 1))


def values_of(values: Iterable[float]) -> list[float]:
    """The finite numbers of `values` (NaN / None dropped: a missing seed)."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "f":  # already numbers: no conversion needed
        return [float(v) for v in values[np.isfinite(values)]]
    x = pd.to_numeric(pd.Series(list(values), dtype="object"), errors="coerce").to_numpy(dtype=np.float64)
    return [float(v) for v in x[np.isfinite(x)]]
