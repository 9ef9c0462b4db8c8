"""Holm's correction over the claims: a decisive verdict stands only if its test survives it.

The family is every claim decided on a primary statistic against a margin (27 statistics read one at
a time would make at least one false call likely: about 0.37 under the null at 0.05 each in the
2026-11-30 ledger). Holm runs at the one-sided ALPHA = 0.025 that the two-sided 95 % intervals
mirror, so the familywise error, both sides of a margin counted, is at most 0.05
(`headlab.stats.decisions`).

Looks (`headlab.reproduce.looks`) spend that alpha by the plan each spec fixes (`seeds.alpha`): a
claim's p-value at look k enters the family as p * ALPHA / alpha_k, a valid p-value for its claim
whichever look it comes from (a union bound over the looks: P(p1 * ALPHA / a1 <= t or
p2 * ALPHA / a2 <= t) <= t (a1 + a2) / ALPHA <= t), so one Holm family runs across the looks.

Every decisive verdict is inside the family: one without a p-value (no t-test) is not decisive. The
correction starts from each claim's interval verdict every time, so running it again over a larger
set (look 2 added) gives the verdicts of that whole family.
"""

from __future__ import annotations

import math

from headlab.reproduce.verdict import DECISIVE, INCONCLUSIVE, ClaimResult
from headlab.stats.decisions import ALPHA, holm

METHOD = (f"Holm over the claims' primary statistics (statsmodels multipletests) at one-sided {ALPHA}, "
          "each look's p-value weighted by the spec's alpha-spending plan: familywise error at most 0.05")


def spent(result: ClaimResult) -> float:
    """The claim's p-value as it enters the family: p * ALPHA / (the alpha its spec spends at its look)."""
    if result.spec.primary is None or not math.isfinite(result.p_value):
        return math.nan
    return min(1.0, result.p_value * ALPHA / result.spec.alpha_at(result.look))


def control(results: list[ClaimResult], alpha: float = ALPHA, label: str = "") -> list[ClaimResult]:
    """Set `p_holm` on every claim with a margin and a p-value and give each its verdict after the
    correction (from its interval verdict); `label` names the family in the reason."""
    for r in results:
        if r.interval_verdict:
            r.verdict, r.reason = r.interval_verdict, r.interval_reason
        else:
            r.interval_verdict, r.interval_reason = r.verdict, r.reason
        r.p_holm = math.nan
    family = [r for r in results if r.spec.primary is not None and math.isfinite(r.p_value)]
    for r, adjusted in zip(family, holm([spent(r) for r in family], alpha)):
        r.p_holm = adjusted
        if r.verdict in DECISIVE and adjusted > alpha:
            r.reason = (f"{r.verdict} before the correction (p {r.p_value:.3g}), but Holm-adjusted p {adjusted:.3g} > {alpha}"
                        f"{f' in the {label} family' if label else ''}: {r.reason}")
            r.verdict = INCONCLUSIVE
    for r in results:
        if r.verdict in DECISIVE and r.spec.primary is not None and not math.isfinite(r.p_value):
            r.reason = f"{r.verdict} by its interval, but without a test it is outside the Holm family, so not decisive: {r.reason}"
            r.verdict = INCONCLUSIVE
    return results
