"""Do winners move farther? Rank and linear correlation of head movement with importance (pure).

`movement_importance_correlation`: Spearman and Pearson correlation of how far / how hard a head
was pushed (cumulative gradient norm, distance from init) with its final importance proxy.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

from headlab.analysis._arrays import as_float64
from headlab.errors import DataError


@dataclass(frozen=True)
class Correlation:
    """Spearman (rank) and Pearson correlation with two-sided p-values over `n` finite pairs.

    NaN when fewer than 3 pairs or either side is constant (no correlation is defined).
    """

    n: int
    spearman: float
    spearman_p: float
    pearson: float
    pearson_p: float


def movement_importance_correlation(movement, importance) -> Correlation:
    """Correlate per-head `movement [head]` (cumulative grad norm or distance from init) with a
    final `importance [head]` proxy (e.g. attention specificity 1 - entropy_norm).

    "Winners move farther" predicts a positive correlation. Pairs with a NaN on either side are
    dropped.

    >>> c = movement_importance_correlation([1.0, 2.0, 3.0, 4.0], [0.1, 0.3, 0.2, 0.9])
    >>> round(c.spearman, 3), round(c.pearson, 3)
    (0.8, 0.826)
    """
    x = as_float64(movement).reshape(-1).numpy()
    y = as_float64(importance).reshape(-1).numpy()
    if x.shape != y.shape:
        raise DataError("importance", f"expected {x.shape[0]} values (one per head, like movement), got {y.shape[0]}")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return Correlation(int(x.size), math.nan, math.nan, math.nan, math.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        rho = stats.spearmanr(x, y)
        r = stats.pearsonr(x, y)
    return Correlation(int(x.size), float(rho.statistic), float(rho.pvalue), float(r.statistic), float(r.pvalue))
