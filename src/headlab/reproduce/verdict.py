"""A claim's verdict from its statistics (pure).

A spec with a `primary` statistic and a `margin` (issue 25) is decided on that one statistic:

- not testable at this scale: the `prerequisite` (the phenomenon formed, the information is in the
  input) does not hold, or cannot be read; the claim was never put to the test;
- supported: the interval lies beyond the margin, on the claimed side;
- direction only: the interval lies between no effect and the margin (the sign holds, the size does not);
- contradicted: the interval lies short of the margin and reaches no effect (smaller than claimed);
- inconclusive: the interval straddles the margin, or there is no interval (one seed, no spread).

Each decisive verdict carries the one-sided p-value of the test it rests on (`headlab.stats.decisions`),
and `headlab.reproduce.multiplicity` keeps it only if it survives Holm's correction over the claims.
Older specs without a margin keep their two written rules (supported_if / contradicted_if).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from headlab.config.claim_spec import Direction
from headlab.errors import DataError
from headlab.reproduce.rules import evaluate
from headlab.reproduce.spec import ClaimSpec
from headlab.reproduce.statistics import Statistic

SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_MEASURED = "supported", "contradicted", "inconclusive", "not measured"
DIRECTION_ONLY, NOT_TESTABLE = "direction only", "not testable at this scale"
VERDICTS = (SUPPORTED, CONTRADICTED, DIRECTION_ONLY, INCONCLUSIVE, NOT_TESTABLE, NOT_MEASURED)
DECISIVE = (SUPPORTED, CONTRADICTED, DIRECTION_ONLY)


@dataclass
class ClaimResult:
    spec: ClaimSpec
    verdict: str
    reason: str
    statistics: dict[str, Statistic] = field(default_factory=dict)
    source: str = ""  # where the evidence came from (a table path, or "computed")
    figure: str = ""  # the figure that shows the evidence ("" when there is none on disk)
    coverage: str = ""  # for a sweep: "k of n jobs usable" (a verdict on an unfinished sweep says so)
    p_value: float = math.nan   # the one-sided test of the verdict (or the smallest of the three when undecided)
    p_holm: float = math.nan    # after Holm's correction over the claims (multiplicity.control)
    provenance: str = ""        # the folder (and commit) the evidence was read from, and what was refused
    look: int = 1               # the cpu scale's look that decided it (2: the replication, headlab.reproduce.looks)
    first_look: str = ""        # at look 2: what look 1 gave, kept beside the verdict


def decide(spec: ClaimSpec, statistics: dict[str, Statistic], source: str = "") -> ClaimResult:
    """The verdict of `spec` on `statistics` (every statistic the spec names must be present)."""
    values: dict[str, float] = {}
    for name, stat in statistics.items():
        values.update(stat.values(name))
    if spec.primary is not None:
        return _against_margin(spec, statistics, values, source)
    supported, contradicted = evaluate(spec.supported_if, values), evaluate(spec.contradicted_if, values)
    if supported and contradicted:
        raise DataError(spec.path, f"both rules hold for {values}: supported_if and contradicted_if must exclude each other")
    if supported:
        return ClaimResult(spec, SUPPORTED, f"{spec.supported_if.text} holds", statistics, source)
    if contradicted:
        return ClaimResult(spec, CONTRADICTED, f"{spec.contradicted_if.text} holds", statistics, source)
    undecided = sorted(n for r in (spec.supported_if, spec.contradicted_if) if evaluate(r, values) is None for n in r.names
                       if not _finite(values.get(n)))
    why = f"undecided: no finite {', '.join(dict.fromkeys(undecided))}" if undecided else "neither rule holds"
    return ClaimResult(spec, INCONCLUSIVE, why, statistics, source)


def _against_margin(spec: ClaimSpec, statistics: dict[str, Statistic], values: dict[str, float], source: str) -> ClaimResult:
    result = _margin_verdict(spec, statistics, values, source)
    if spec.proxy and result.verdict in DECISIVE:
        result.reason = f"{result.verdict} on a proxy, so not decisive ({spec.proxy}): {result.reason}"
        result.verdict = INCONCLUSIVE
    return result


def _margin_verdict(spec: ClaimSpec, statistics: dict[str, Statistic], values: dict[str, float], source: str) -> ClaimResult:
    from headlab.stats.decisions import one_sided_p

    if spec.prerequisite is not None and evaluate(spec.prerequisite, values) is not True:
        held = evaluate(spec.prerequisite, values)
        why = "is false" if held is False else "cannot be read (no finite value)"
        return ClaimResult(spec, NOT_TESTABLE, f"prerequisite `{spec.prerequisite.text}` {why}: {spec.prerequisite_reason}",
                           statistics, source)
    s, m = statistics[spec.primary], spec.margin
    sign = 1.0 if m.direction is Direction.greater else -1.0
    # on the claimed side: larger is more effect
    low, high = sorted((sign * s.ci_low, sign * s.ci_high))
    margin, null = sign * m.value, sign * m.no_effect
    side = ("larger", "smaller") if sign > 0 else ("smaller", "larger")
    p_above = one_sided_p(s.mean, s.se, s.df, m.value, side[0])
    p_below = one_sided_p(s.mean, s.se, s.df, m.value, side[1])
    p_sign = one_sided_p(s.mean, s.se, s.df, m.no_effect, side[0])
    shown = f"{spec.primary} {_fmt(s.mean)} [{_fmt(s.ci_low)}, {_fmt(s.ci_high)}] ({s.method})"
    bar = f"margin {_fmt(m.value)} ({m.reason})"
    if not (math.isfinite(low) and math.isfinite(high)):
        p = min((p for p in (p_above, p_below) if math.isfinite(p)), default=math.nan)
        return ClaimResult(spec, INCONCLUSIVE, f"no interval: {shown}", statistics, source, p_value=p)
    if low > margin:
        return ClaimResult(spec, SUPPORTED, f"{shown} lies beyond the {bar}", statistics, source, p_value=p_above)
    if high < margin and low > null:
        return ClaimResult(spec, DIRECTION_ONLY, f"{shown}: the sign holds (beyond {_fmt(m.no_effect)}) but not the {bar}",
                           statistics, source, p_value=_max(p_below, p_sign))
    if high < margin:
        return ClaimResult(spec, CONTRADICTED, f"{shown} lies short of the {bar}: smaller than claimed",
                           statistics, source, p_value=p_below)
    return ClaimResult(spec, INCONCLUSIVE, f"{shown} straddles the {bar}", statistics, source,
                       p_value=min((p for p in (p_above, p_below) if math.isfinite(p)), default=math.nan))


def not_measured(spec: ClaimSpec, reason: str) -> ClaimResult:
    return ClaimResult(spec, NOT_MEASURED, reason)


def _max(a: float, b: float) -> float:
    """The intersection-union test's p: both nulls must be rejected (NaN when either is missing)."""
    return max(a, b) if math.isfinite(a) and math.isfinite(b) else math.nan


def _fmt(x: float) -> str:
    return f"{x:.3g}" if math.isfinite(x) else "nan"


def _finite(v) -> bool:
    return v is not None and v == v and abs(v) != float("inf")
