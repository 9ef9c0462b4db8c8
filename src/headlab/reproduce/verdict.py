"""A claim's verdict from its statistics and the rules written before running (pure).

supported: `supported_if` holds; contradicted: `contradicted_if` holds; inconclusive: neither (or a
rule reads a value that does not exist, e.g. an interval from one seed); not measured: the spec
has no evidence yet, or the tables hold none (the reason says which).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from headlab.errors import DataError
from headlab.reproduce.rules import evaluate
from headlab.reproduce.spec import ClaimSpec
from headlab.reproduce.statistics import Statistic

SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_MEASURED = "supported", "contradicted", "inconclusive", "not measured"
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_MEASURED)


@dataclass
class ClaimResult:
    spec: ClaimSpec
    verdict: str
    reason: str
    statistics: dict[str, Statistic] = field(default_factory=dict)
    source: str = ""  # where the evidence came from (a table path, or "computed")
    figure: str = ""  # the figure that shows the evidence ("" when there is none on disk)
    coverage: str = ""  # for a sweep: "k of n jobs usable" (a verdict on an unfinished sweep says so)


def decide(spec: ClaimSpec, statistics: dict[str, Statistic], source: str = "") -> ClaimResult:
    """Apply the spec's two rules to `statistics` (every statistic the spec names must be present).

    Both rules holding at once means the spec's rules overlap: a DataError, never a verdict.
    """
    values: dict[str, float] = {}
    for name, stat in statistics.items():
        values.update(stat.values(name))
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


def not_measured(spec: ClaimSpec, reason: str) -> ClaimResult:
    return ClaimResult(spec, NOT_MEASURED, reason)


def _finite(v) -> bool:
    return v is not None and v == v and abs(v) != float("inf")
