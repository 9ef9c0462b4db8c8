"""Holm's correction over the claims: a decisive verdict stands only if its test survives it.

The family is every claim decided on a primary statistic against a margin whose test has a
p-value (27 statistics read one at a time would make at least one false call likely: about
0.37 under the null at 0.05 each in the 2026-11-30 ledger). A verdict whose interval is decisive
but whose Holm-adjusted p exceeds 0.05 becomes inconclusive, and says so. Where a share's interval
is an exact bound without a t-test (no spread over seeds), there is no p-value: that verdict is
reported but marked outside the corrected family.
"""

from __future__ import annotations

import math

from headlab.reproduce.verdict import DECISIVE, INCONCLUSIVE, ClaimResult
from headlab.stats.decisions import ALPHA, holm

METHOD = "Holm over the claims' primary statistics (statsmodels multipletests), alpha 0.05"


def control(results: list[ClaimResult], alpha: float = ALPHA, label: str = "") -> list[ClaimResult]:
    """Set `p_holm` on every claim with a margin and a p-value; demote decisive verdicts that do not
    survive. `label` names the family in the reason (the cpu scale's look 2 has its own)."""
    family = [r for r in results if r.spec.primary is not None and math.isfinite(r.p_value)]
    for r, adjusted in zip(family, holm([r.p_value for r in family], alpha)):
        r.p_holm = adjusted
        if r.verdict in DECISIVE and adjusted > alpha:
            r.reason = (f"{r.verdict} before the correction (p {r.p_value:.3g}), but Holm-adjusted p {adjusted:.3g} > {alpha}"
                        f"{f' in the {label} family' if label else ''}: "
                        f"{r.reason}")
            r.verdict = INCONCLUSIVE
    for r in results:
        if r.verdict in DECISIVE and r.spec.primary is not None and not math.isfinite(r.p_value):
            r.reason += " (an exact bound without a t-test: outside the Holm family)"
    return results
