"""Holm's correction over the claims: a decisive verdict stands only if the tests it rests on
survive it.

The family is every one-sided null that a margin's verdicts reject, of every claim decided on a
primary statistic against a margin (`verdict.NEEDS`: above / below the margin, above / below no
effect, above the margin's mirror). Holm runs over all of them, not over one p per claim: a claim's
verdict is chosen from its data among several nulls, and a family of one chosen p per claim lets the
claims whose verdict is right ("absent" at no effect, with tiny p) step Holm down until every
other claim is tested at nearly the full alpha (simulated: a familywise error of 0.39 over 17 claims
with no effect, `headlab.reproduce.simulate`). Over all the nulls any false verdict rejects a true
null, so Holm bounds the familywise error by its alpha, ALPHA = 0.025 one-sided, the level the
two-sided 95 % intervals mirror (`headlab.stats.decisions`). After the correction each claim's
verdict is read again from the nulls that survive (`verdict.from_rejections`).

Looks (`headlab.reproduce.looks`) spend that alpha by the plan each spec fixes (`seeds.alpha`): a
p-value at look k enters the family as p * ALPHA / alpha_k, a valid p-value for its null whichever
look it comes from (a union bound over the looks: P(p1 * ALPHA / a1 <= t or p2 * ALPHA / a2 <= t)
<= t (a1 + a2) / ALPHA <= t), so one Holm family runs across the looks.

A verdict without tests (no t-interval) is outside the family and not decisive. The correction
starts from each claim's interval verdict every time, so running it again over a larger set (look 2
added) gives the verdicts of that whole family.
"""

from __future__ import annotations

import math

from headlab.reproduce.verdict import (ABOVE, BELOW, DECISIVE, INCONCLUSIVE, MIRROR, NEEDS, ClaimResult,
                                      from_rejections)
from headlab.stats.decisions import ALPHA, holm

METHOD = (f"Holm over every one-sided null the claims' verdicts rest on (statsmodels multipletests) at {ALPHA}, "
          "each look's p-values weighted by the spec's alpha-spending plan: familywise error at most 0.025 "
          "(95 % intervals)")


def weight(result: ClaimResult) -> float:
    """ALPHA over the alpha the claim's spec spends at its look: a p enters the family times this."""
    return ALPHA / result.spec.alpha_at(result.look)


def spent(result: ClaimResult) -> float:
    """The claim's verdict p as it would enter the family (weighted by its look's alpha)."""
    if result.spec.primary is None or not math.isfinite(result.p_value):
        return math.nan
    return min(1.0, result.p_value * weight(result))


def control(results: list[ClaimResult], alpha: float = ALPHA, label: str = "") -> list[ClaimResult]:
    """Set `p_holm` on every claim with tests and give each its verdict after the correction (read
    from the nulls that survive); `label` names the family in the reason."""
    for r in results:
        if r.interval_verdict:
            r.verdict, r.reason = r.interval_verdict, r.interval_reason
        else:
            r.interval_verdict, r.interval_reason = r.verdict, r.reason
        r.p_holm = math.nan
    nulls = [(r, name, min(1.0, p * weight(r))) for r in results if r.spec.primary is not None for name, p in r.tests.items()]
    adjusted: dict[int, dict[str, float]] = {}
    for (r, name, _), p in zip(nulls, holm([p for *_, p in nulls], alpha)):
        adjusted.setdefault(id(r), {})[name] = p
    for r in results:
        if r.spec.primary is None:
            continue
        if r.verdict in DECISIVE and not r.tests:
            r.reason = f"{r.verdict} by its interval, but without a test it is outside the Holm family, so not decisive: {r.reason}"
            r.verdict = INCONCLUSIVE
            continue
        after = adjusted.get(id(r), {})
        needs = NEEDS.get(r.verdict, {ABOVE, BELOW})
        r.p_holm = (max if r.verdict in NEEDS else min)((after[n] for n in needs if n in after), default=math.nan)
        if r.verdict not in DECISIVE:
            continue
        kept = from_rejections({n for n, p in after.items() if p <= alpha}, MIRROR in r.tests)
        if kept != r.verdict:
            r.reason = (f"{r.verdict} before the correction (p {r.p_value:.3g}), {kept} after Holm (adjusted p "
                        f"{r.p_holm:.3g} > {alpha}{f' in the {label} family' if label else ''}): {r.reason}")
            r.verdict = kept
    return results
