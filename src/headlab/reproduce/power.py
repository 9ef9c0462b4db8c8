"""The report's power section: for each undecided claim, the seeds that would decide it at the
observed per-seed SD, and the smallest effect the seeds run could detect (statsmodels TTestPower,
one-sided at 0.05 with 80 % power, seeds as the unit)."""

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


def power_rows(results: list[ClaimResult]) -> list[PowerRow]:
    """One row per claim with a margin that is neither decided nor unmeasured."""
    rows = []
    for r in results:
        if r.spec.primary is None or r.verdict in DECISIVE or r.verdict == NOT_MEASURED:
            continue
        s = r.statistics.get(r.spec.primary)
        if s is None:
            rows.append(PowerRow(r.spec.claim, r.spec.primary, math.nan, math.nan, 0, r.spec.margin.value, math.nan,
                                 math.nan, r.reason))
            continue
        gap = abs(s.mean - r.spec.margin.value)
        rows.append(PowerRow(r.spec.claim, r.spec.primary, s.mean, s.sd, s.n, r.spec.margin.value,
                             seeds_to_decide(gap, s.sd), minimum_detectable(s.sd, s.n), _why(r, s)))
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
             "Seeds as the unit, one-sided t-test at 0.05 with 80 % power (statsmodels TTestPower), at the observed "
             "per-seed SD: the seeds that would tell the observed mean from the margin, and the smallest distance "
             "from the margin the seeds run could detect.", "",
             "| claim | primary | mean | per-seed SD | seeds run | margin | seeds to decide | detectable at seeds run | why undecided |",
             "|---|---|---|---|---|---|---|---|---|"]
    n = number_text
    lines += [f"| {p.claim} | {p.primary} | {n(p.mean)} | {n(p.sd)} | {p.n} | {n(p.margin)} | "
              f"{_seeds(p.seeds_to_decide)} | {n(p.detectable)} | {p.why} |" for p in rows]
    return lines


def _seeds(x: float) -> str:
    return str(math.ceil(x)) if math.isfinite(x) else "-"


def number_text(x: float) -> str:
    """Three significant digits, "-" for a missing (NaN) value: how the report's tables show a number."""
    return f"{x:.3g}" if math.isfinite(x) else "-"
