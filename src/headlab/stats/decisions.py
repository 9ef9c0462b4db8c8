"""Tests against the article's margins, multiplicity over the claims and power (statsmodels).

A claim is decided on one primary statistic against the smallest effect the article's words allow
(the margin `m`, on the claimed side of zero):

- `p_above`: H0 effect <= m (rejected: the interval lies above the margin, "supported");
- `p_below`: H0 effect >= m (rejected: smaller than claimed, the upper half of a TOST);
- `p_sign`: H0 effect <= 0 (rejected together with `p_below`: the direction holds, the size does not).

The p-values are one-sided t-tests from an estimate, its standard error and degrees of freedom
(a paired or Welch interval), read off scipy's t distribution (for the same seeds they equal
`scipy.stats.ttest_1samp(..., alternative=...)`, which a test checks); `tost_paired` is statsmodels'
`ttost_paired`, `holm` its `multipletests`, the power its `TTestPower`.

One error level throughout: one-sided tests at ALPHA = 0.025 beside two-sided 95 % intervals (not
90 % intervals at 0.05: every table and figure of the project already shows 95 %). An interval lies
beyond a value exactly when the one-sided test against it rejects at 0.025, so the verdict read off
the interval and the tests in the Holm family agree. Holm runs at 0.025 over every one-sided null
the verdicts rest on (`headlab.reproduce.multiplicity`), which bounds the familywise error by 0.025,
within issue 31's 0.05 (FAMILYWISE); the simulation shows it (`headlab.reproduce.simulate`).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

ALPHA = 0.025       # one-sided, per test, beside two-sided 95 % intervals
FAMILYWISE = 0.05   # the familywise error the pipeline must stay within (Holm at ALPHA over every null keeps 0.025)
POWER = 0.8


def one_sided_p(estimate: float, se: float, df: float, value: float, alternative: str) -> float:
    """p of H0 "effect <= value" (alternative "larger") or "effect >= value" ("smaller"); NaN when
    the standard error is not a positive finite number.

    >>> round(one_sided_p(0.02, 0.005, 9, 0.0, "larger"), 5)
    0.00156
    >>> math.isnan(one_sided_p(0.0, 0.0, 2, 0.0, "larger"))
    True
    """
    if not (math.isfinite(se) and se > 0 and math.isfinite(df) and df > 0 and math.isfinite(estimate)):
        return math.nan
    from scipy.special import stdtr  # Student's t CDF: scipy.stats.t.cdf without the distribution object's overhead

    t = (estimate - value) / se
    return float(stdtr(df, -t) if alternative == "larger" else stdtr(df, t))


def tost_paired(a: Sequence[float], b: Sequence[float], margin: float) -> float:
    """statsmodels' TOST p that the paired difference a - b lies inside (-margin, margin): small p says
    the effect is smaller than the margin either way.

    >>> round(tost_paired([0.50, 0.52, 0.51, 0.49], [0.50, 0.51, 0.50, 0.50], 0.05), 4)
    0.0011
    """
    from statsmodels.stats.weightstats import ttost_paired

    p, _, _ = ttost_paired(np.asarray(a, float), np.asarray(b, float), -abs(margin), abs(margin))
    return float(p)


def holm(pvalues: Sequence[float], alpha: float = ALPHA) -> list[float]:
    """Holm-adjusted p-values (statsmodels.stats.multitest.multipletests); NaN stays NaN and is not
    counted as a hypothesis.

    >>> [round(p, 3) for p in holm([0.01, 0.04, float("nan"), 0.03])]
    [0.03, 0.06, nan, 0.06]
    """
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    finite = np.isfinite(p)
    if finite.any():
        out[finite] = multipletests(p[finite], alpha=alpha, method="holm")[1]
    return [float(v) for v in out]


def seeds_to_decide(gap: float, sd: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """Seeds a one-sided t-test needs to tell an effect `gap` away from its margin at the observed
    per-seed SD (statsmodels TTestPower); NaN when gap or sd is not positive.

    >>> seeds_to_decide(0.01, 0.01) > 9
    True
    """
    if not (gap > 0 and sd > 0 and math.isfinite(gap) and math.isfinite(sd)):
        return math.nan
    from statsmodels.stats.power import TTestPower

    solver = TTestPower()
    if solver.power(effect_size=gap / sd, nobs=2, alpha=alpha, alternative="larger") >= power:
        return 2.0  # two seeds already suffice (the solver finds no root below them)
    return float(solver.solve_power(effect_size=gap / sd, alpha=alpha, power=power, alternative="larger"))


def minimum_detectable(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest effect (in the statistic's units) a one-sided t-test on `n` seeds detects with
    `power` at the observed per-seed SD.

    >>> round(minimum_detectable(1.0, 10), 3)
    0.996
    """
    if not (n >= 2 and sd > 0 and math.isfinite(sd)):
        return math.nan
    from statsmodels.stats.power import TTestPower

    return float(TTestPower().solve_power(nobs=n, alpha=alpha, power=power, alternative="larger")) * sd
