"""Movement-importance correlation against the rank formula and numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from headlab.analysis import movement_importance as mi
from headlab.errors import DataError


def test_correlation_against_the_rank_formula():
    movement = [3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0]
    importance = [0.3, 0.1, 0.2, 0.25, 0.6, 0.5, 0.05]
    c = mi.movement_importance_correlation(movement, importance)
    d = np.argsort(np.argsort(movement)) - np.argsort(np.argsort(importance))  # ranks; no ties
    n = len(movement)
    assert c.n == n
    assert c.spearman == pytest.approx(1 - 6 * np.sum(d**2) / (n * (n**2 - 1)))
    assert c.pearson == pytest.approx(np.corrcoef(movement, importance)[0, 1])


def test_correlation_drops_nan_and_refuses_constant_input():
    c = mi.movement_importance_correlation([1.0, 2.0, np.nan, 3.0, 4.0], [1.0, 2.0, 3.0, np.nan, 5.0])
    assert c.n == 3 and c.spearman == pytest.approx(1.0)
    assert math.isnan(mi.movement_importance_correlation([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]).spearman)
    assert math.isnan(mi.movement_importance_correlation([1.0, 2.0], [1.0, 2.0]).pearson)
    with pytest.raises(DataError, match="one per head"):
        mi.movement_importance_correlation([1.0, 2.0], [1.0, 2.0, 3.0])
