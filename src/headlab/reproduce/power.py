"""The report's power section: for each undecided claim, the seeds that would decide it at the
observed per-seed SD, and the smallest effect the seeds run could detect (statsmodels TTestPower,
80 % power, seeds as the unit), at the alpha the pipeline actually uses: the one-sided alpha the
claim's spec spends at its last planned look, divided by the size of the Holm family: every null a
verdict rests on, not one a claim (Holm's first step, the level a claim may have to meet: `alpha_used`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from headlab.reproduce.verdict import DECISIVE, NOT_MEASURED, ClaimResult
from headlab.stats.decisions import minimum_detectable, seeds_to_decide


@dataclass(frozen=True)
class PowerRow:
    claim: str
    primary: str
    mean: float
    sd: float
    n: int
    margin: float
    seeds_to_decide: float  # to tell the observed mean from the margin (NaN: no spread, or on the margin)
    detectable: float       # the smallest distance from the margin the n seeds run would detect
    why: str
    alpha: float = math.nan  # the one-sided level the seeds are sized for (alpha_used)


def alpha_used(spec, family_size: int) -> float:
    """The one-sided level a claim's test may have to meet: its last planned look's alpha over the
    Holm family's size (the first step of Holm; Bonferroni).

    >>> from types import SimpleNamespace
    >>> alpha_used(SimpleNamespace(alpha_spending=(0.0125, 0.0125)), 16)
    0.00078125
    """
    return spec.alpha_spending[-1] / max(1, family_size)


def power_rows(results: list[ClaimResult]) -> list[PowerRow]:
    """One row per claim with a margin that is neither decided nor unmeasured."""
    rows = []
    # Holm runs over every null a verdict rests on (`multiplicity.control`), two to four a claim, not one
    family = sum(len(r.tests) for r in results if r.spec.primary is not None and r.verdict != NOT_MEASURED)
    for r in results:
        if r.spec.primary is None or r.verdict in DECISIVE or r.verdict == NOT_MEASURED:
            continue
        s = r.statistics.get(r.spec.primary)
        if s is None:
            rows.append(PowerRow(r.spec.claim, r.spec.primary, math.nan, math.nan, 0, r.spec.margin.value, math.nan,
                                 math.nan, r.reason))
            continue
        gap, alpha = abs(s.mean - r.spec.margin.value), alpha_used(r.spec, family)
        rows.append(PowerRow(r.spec.claim, r.spec.primary, s.mean, s.sd, s.n, r.spec.margin.value,
                             seeds_to_decide(gap, s.sd, alpha), minimum_detectable(s.sd, s.n, alpha), _why(r, s), alpha))
    return rows


def _why(r: ClaimResult, s) -> str:
    if r.spec.proxy:
        return f"proxy: {r.spec.proxy}"
    if not math.isfinite(s.sd):
        return "no per-seed spread to size it on (one seed, or shares pooled to an exact bound)"
    return r.reason


def power_markdown(rows: list[PowerRow]) -> list[str]:
    if not rows:
        return []
    lines = ["", "## Power of the undecided claims", "",
             "Seeds as the unit, a one-sided t-test with 80 % power (statsmodels TTestPower) at the alpha the pipeline "
             "uses: the claim's last planned look's one-sided alpha over the size of the Holm family (Holm's first "
             "step), at the observed per-seed SD: the seeds that would tell the observed mean from the margin, and "
             "the smallest distance from the margin the seeds run could detect.", "",
             "| claim | primary | mean | per-seed SD | seeds run | margin | alpha | seeds to decide | detectable at seeds run | why undecided |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    n = number_text
    lines += [f"| {p.claim} | {p.primary} | {n(p.mean)} | {n(p.sd)} | {p.n} | {n(p.margin)} | {n(p.alpha)} | "
              f"{_seeds(p.seeds_to_decide)} | {n(p.detectable)} | {p.why} |" for p in rows]
    return lines


def _seeds(x: float) -> str:
    return str(math.ceil(x)) if math.isfinite(x) else "-"


def number_text(x: float) -> str:
    """Three significant digits, "-" for a missing (NaN) value: how the report's tables show a number."""
    return f"{x:.3g}" if math.isfinite(x) else "-"
