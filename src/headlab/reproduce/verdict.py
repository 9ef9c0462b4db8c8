"""A claim's verdict from its statistics (pure).

A spec with a `primary` statistic and a `margin` (issue 25) is decided on that one statistic, its
two-sided 95 % interval read on the claimed side (larger = more effect), with `z` the no-effect value,
`m` the margin and `d = m - z` the margin's distance from no effect:

- not testable at this scale: the `prerequisite` (the phenomenon formed, the information is in the
  input) does not hold, or cannot be read; the claim was never put to the test;
- supported: the interval lies beyond the margin (low > m);
- direction only: it lies between no effect and the margin (z < low, high < m);
- reversed: it lies on the other side of no effect (high < z);
- absent: it holds no effect, lies short of the margin and no further below no effect than the
  margin lies above it (z - d < low <= z, high < m): whatever effect there is, it is smaller than
  the margin either way (a TOST of equivalence to no effect); a bound of the statistic's range
  beyond z - d (a share cannot go below 0) settles that side by itself;
- smaller than claimed: short of the margin, the rest (it reaches below z - d: the claimed size is
  excluded, but neither "absent" nor "reversed" can be said);
- inconclusive: the interval straddles the margin, or there is no interval (one seed, no spread).

The three verdicts short of the margin are issue 31's split of the old "contradicted". Each decisive
verdict carries the one-sided p-value (at `headlab.stats.decisions.ALPHA` = 0.025, which the 95 %
interval mirrors) of the test it rests on, and `headlab.reproduce.multiplicity` keeps it only if it
survives Holm's correction over the claims. A primary whose units are the heads of one model
(`group_difference`) is never decisive: heads of one model are not independent units.
Older specs without a margin keep their two written rules (supported_if / contradicted_if).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from headlab.reproduce.spec_schema import Direction, StatisticKind
from headlab.errors import DataError
from headlab.reproduce.rules import evaluate
from headlab.reproduce.spec import ClaimSpec
from headlab.reproduce.statistics import Statistic

SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_MEASURED = "supported", "contradicted", "inconclusive", "not measured"
DIRECTION_ONLY, NOT_TESTABLE = "direction only", "not testable at this scale"
ABSENT, SMALLER, REVERSED = "absent", "smaller than claimed", "reversed"
SHORT_OF_MARGIN = (ABSENT, SMALLER, REVERSED)   # issue 31's split of "contradicted" (a margin's verdicts)
VERDICTS = (SUPPORTED, DIRECTION_ONLY, *SHORT_OF_MARGIN, CONTRADICTED, INCONCLUSIVE, NOT_TESTABLE, NOT_MEASURED)
DECISIVE = (SUPPORTED, DIRECTION_ONLY, *SHORT_OF_MARGIN, CONTRADICTED)  # contradicted: older specs' written rule only
# the one-sided nulls a margin's verdicts reject (effect on the claimed side): above "<= margin",
# below ">= margin", sign "<= no effect", beyond_null ">= no effect", mirror "<= no effect - (margin - no effect)"
ABOVE, BELOW, SIGN, BEYOND_NULL, MIRROR = "above", "below", "sign", "beyond_null", "mirror"
NEEDS = {SUPPORTED: {ABOVE}, DIRECTION_ONLY: {BELOW, SIGN}, REVERSED: {BEYOND_NULL}, ABSENT: {BELOW, MIRROR},
         SMALLER: {BELOW}}


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
    interval_verdict: str = ""  # the verdict before Holm, kept by multiplicity.control (it starts from it again)
    interval_reason: str = ""
    # the one-sided p of each null the verdicts rest on (NEEDS): Holm runs over all of them
    tests: dict[str, float] = field(default_factory=dict)
    rule_commit: str = ""       # the commit that froze the spec's rule ("uncommitted"; "" outside git), reproduce.freeze
    rule_committed_at: str = ""
    first_job: str = ""         # the first job's start (UTC) and where it was read
    freeze: str = ""            # the flag when the rule is newer than the first job
    scale: str = ""             # where the evidence was reached: layers x d_model, heads, length, data, seeds (reproduce.scale)


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
    if result.verdict in DECISIVE:
        why = (f"on a proxy ({spec.proxy})" if spec.proxy else
               "on the heads of one model, which are not independent units (a decision needs models or seeds as units)"
               if spec.statistics[spec.primary].kind is StatisticKind.group_difference else "")
        if why:
            result = ClaimResult(spec, INCONCLUSIVE, f"{result.verdict} {why}, so not decisive: {result.reason}", statistics,
                                 source, p_value=result.p_value)  # no tests: outside the family
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
    mirror = null - (margin - null)          # as far below no effect as the margin lies above it
    more, less = ("larger", "smaller") if sign > 0 else ("smaller", "larger")
    p_above = one_sided_p(s.mean, s.se, s.df, m.value, more)        # H0: effect <= margin
    p_below = one_sided_p(s.mean, s.se, s.df, m.value, less)        # H0: effect >= margin
    p_sign = one_sided_p(s.mean, s.se, s.df, m.no_effect, more)     # H0: effect <= no effect
    p_reversed = one_sided_p(s.mean, s.se, s.df, m.no_effect, less)  # H0: effect >= no effect
    reach = _reach(spec, sign)
    mirror_possible = mirror > reach
    p_mirror = one_sided_p(s.mean, s.se, s.df, sign * mirror, more) if mirror_possible else 0.0
    shown = f"{spec.primary} {_fmt(s.mean)} [{_fmt(s.ci_low)}, {_fmt(s.ci_high)}] ({s.method})"
    bar = f"margin {_fmt(m.value)} ({m.reason})"

    tests = {ABOVE: p_above, BELOW: p_below, SIGN: p_sign, BEYOND_NULL: p_reversed}
    if mirror_possible:
        tests[MIRROR] = p_mirror
    tests = {k: v for k, v in tests.items() if math.isfinite(v)}

    def result(verdict: str, why: str, p: float) -> ClaimResult:
        return ClaimResult(spec, verdict, why, statistics, source, p_value=p, tests=tests)

    if not (math.isfinite(low) and math.isfinite(high)):
        return result(INCONCLUSIVE, f"no interval: {shown}", _min(p_above, p_below))
    if low > margin:
        return result(SUPPORTED, f"{shown} lies beyond the {bar}", p_above)
    if high >= margin:
        return result(INCONCLUSIVE, f"{shown} straddles the {bar}", _min(p_above, p_below))
    if low > null:
        return result(DIRECTION_ONLY, f"{shown}: the sign holds (beyond {_fmt(m.no_effect)}) but not the {bar}",
                      _max(p_below, p_sign))
    if high < null:
        return result(REVERSED, f"{shown} lies on the other side of no effect ({_fmt(m.no_effect)}): the {bar} is reversed",
                      p_reversed)
    if low > mirror:
        band = f"{_fmt(sign * mirror)} and {_fmt(m.value)}" if mirror_possible else f"the range's end and {_fmt(m.value)}"
        return result(ABSENT, f"{shown} holds no effect ({_fmt(m.no_effect)}) and lies between {band}: absent, short of the {bar}",
                      _max(p_below, p_mirror))
    return result(SMALLER, f"{shown} lies short of the {bar}: smaller than claimed (it reaches below "
                           f"{_fmt(sign * mirror)}, so neither absent nor reversed)", p_below)


def from_rejections(rejected: set[str], mirror_possible: bool) -> str:
    """The verdict the rejected nulls allow, in the order the interval reads them: a null that the
    statistic's range rules out (the mirror of a share) counts as rejected."""
    if not mirror_possible:
        rejected = rejected | {MIRROR}
    for verdict in (SUPPORTED, DIRECTION_ONLY, REVERSED, ABSENT, SMALLER):
        if NEEDS[verdict] <= rejected:
            return verdict
    return INCONCLUSIVE


def _reach(spec: ClaimSpec, sign: float) -> float:
    """How far below no effect (on the claimed side) the primary can go (`statistics.value_range`)."""
    from headlab.reproduce.statistics import value_range

    low, high = value_range(spec.statistics[spec.primary]) if spec.primary in spec.statistics else (-math.inf, math.inf)
    return min(sign * low, sign * high)


def _min(*ps: float) -> float:
    return min((p for p in ps if math.isfinite(p)), default=math.nan)


def not_measured(spec: ClaimSpec, reason: str) -> ClaimResult:
    return ClaimResult(spec, NOT_MEASURED, reason)


def _max(a: float, b: float) -> float:
    """The intersection-union test's p: both nulls must be rejected (NaN when either is missing)."""
    return max(a, b) if math.isfinite(a) and math.isfinite(b) else math.nan


def _fmt(x: float) -> str:
    return f"{x:.3g}" if math.isfinite(x) else "nan"


def _finite(v) -> bool:
    return v is not None and v == v and abs(v) != float("inf")
