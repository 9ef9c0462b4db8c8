"""The whole verdict pipeline calibrated by simulation (pure: specs and a generator in, numbers out).

A simulated ledger draws, for every claim with a margin, one value per unit (seed, or disjoint seed
pair where the spec's table is `sweep_seed_pairs.csv`) at a known true effect, as many units as the
spec's confirmatory seeds give, and runs them through the real pipeline: the statistic's
t-interval over the units (`statistics.from_values`, clipped to the statistic's range), the
verdict against the margin (`verdict.decide`), Holm over the claims (`multiplicity.control`), look 2
on fresh units for the claims that names replication seeds and look 1 left inconclusive, and Holm
again across both looks (`looks.with_second_look`). A ledger commits a familywise error when any
final decisive verdict is false for the true effect (`is_false`).

The per-unit values: for a statistic bounded on both sides (a share, a kappa, a correlation), a Beta
distribution on that range with the true effect as its mean; otherwise a normal one. The per-unit SD
is `spread` times the margin's distance from no effect (default one half; for a Beta, as near to it
as the range allows); a true effect on a bound of the range gives that bound in every unit (no
spread, so no interval). The t-tests are exact for normal units only: on a skewed Beta over 5-10
units one side errs more often than 0.025, which a `spread` of 1 shows (docs/reproduce.md). The
prerequisites are taken as met: every claim is tested, the case in which errors can happen.

The scenarios: `no_effect` (every claim at its no-effect value), `at_margin` (every claim exactly at
its margin, where both one-sided nulls hold: the worst case for the familywise error), and
`beyond_margin` (every claim half the margin's distance beyond it: the power).
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass, replace

import numpy as np

from headlab.reproduce.spec_schema import Direction
from headlab.reproduce.looks import with_second_look
from headlab.reproduce.multiplicity import control
from headlab.reproduce.spec import ClaimSpec
from headlab.reproduce.statistics import from_values, value_range
from headlab.reproduce.verdict import (ABSENT, CONTRADICTED, DECISIVE, DIRECTION_ONLY, REVERSED, SMALLER, SUPPORTED,
                                       ClaimResult, decide)

SCENARIOS = ("no_effect", "at_margin", "beyond_margin")


@dataclass(frozen=True)
class Simulated:
    """The outcome of `ledgers` simulated ledgers under one scenario: the share with a familywise
    error, and per claim the share of ledgers whose final verdict was each verdict."""

    scenario: str
    ledgers: int
    familywise_errors: int
    verdicts: dict[str, dict[str, float]]   # claim -> verdict -> share of ledgers
    units: dict[str, tuple[int, int]]       # claim -> units at look 1, at look 2 (0: no second look)

    @property
    def fwer(self) -> float:
        return self.familywise_errors / self.ledgers

    def share(self, claim: str, verdict: str) -> float:
        return self.verdicts.get(claim, {}).get(verdict, 0.0)


def true_effect(spec: ClaimSpec, scenario: str) -> float:
    """The claim's true effect under `scenario`, on the primary statistic's scale."""
    m, z = spec.margin.value, spec.margin.no_effect
    return {"no_effect": z, "at_margin": m, "beyond_margin": m + 0.5 * (m - z)}[scenario]


def is_false(verdict: str, spec: ClaimSpec, effect: float) -> bool:
    """Whether a decisive `verdict` is false when the true effect is `effect` (read on the claimed side)."""
    sign = 1.0 if spec.margin.direction is Direction.greater else -1.0
    theta, m, z = sign * effect, sign * spec.margin.value, sign * spec.margin.no_effect
    holds = {SUPPORTED: theta > m, DIRECTION_ONLY: z < theta < m, REVERSED: theta < z,
             ABSENT: z - (m - z) < theta < m, SMALLER: theta < m, CONTRADICTED: theta < m}
    return verdict in DECISIVE and not holds[verdict]


def units(spec: ClaimSpec, look: int) -> int:
    """Independent units at `look`: seeds, or disjoint seed pairs for a seed-pair table."""
    seeds = len(spec.confirmatory_seeds if look == 1 else spec.replication_seeds)
    return seeds // 2 if spec.evidence.table == "sweep_seed_pairs.csv" else seeds


def draw(spec: ClaimSpec, effect: float, n: int, rng: np.random.Generator, spread: float = 0.5) -> np.ndarray:
    """n per-unit values with mean `effect` (module docstring: Beta on a bounded range, else normal)."""
    low, high = value_range(spec.statistics[spec.primary])
    sd = spread * abs(spec.margin.value - spec.margin.no_effect)
    if not (math.isfinite(low) and math.isfinite(high)):
        return rng.normal(effect, sd, n)
    width = high - low
    mu = (effect - low) / width
    if mu <= 0.0 or mu >= 1.0:
        return np.full(n, low if mu <= 0.0 else high)
    concentration = max(mu * (1 - mu) / (sd / width) ** 2 - 1.0, 1.0)
    return low + width * rng.beta(mu * concentration, (1 - mu) * concentration, n)


def at_scale(specs: list[ClaimSpec], scale: str) -> list[ClaimSpec]:
    """The specs a ledger at `scale` tests: computed claims, and the claims with evidence settings at
    that scale. A claim the scale does not run is not measured there, so outside its Holm family."""
    return [s for s in specs if s.evidence.kind == "computed" or scale in s.has_scale]


def simulate(specs: list[ClaimSpec], scenario: str, ledgers: int, seed: int = 0, spread: float = 0.5) -> Simulated:
    """`ledgers` ledgers of every spec with a margin under `scenario`, through the real pipeline
    (`spread`: the per-unit SD in margin distances)."""
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario {scenario!r}: one of {', '.join(SCENARIOS)}")
    tested = [replace(s, prerequisite=None, prerequisite_config=()) for s in specs if s.primary is not None]
    effects = {s.claim: true_effect(s, scenario) for s in tested}
    rng = np.random.default_rng(seed)
    errors, counts = 0, {s.claim: {} for s in tested}
    # statsmodels' Holm calls gc.collect() on every call (about 0.4 s with torch and pandas loaded);
    # frozen, the objects alive before the loop are not walked again, and a ledger takes about 10 ms
    gc.freeze()
    try:
        for _ in range(ledgers):
            final = ledger(tested, effects, rng, spread)
            errors += any(is_false(r.verdict, r.spec, effects[r.spec.claim]) for r in final)
            for r in final:
                counts[r.spec.claim][r.verdict] = counts[r.spec.claim].get(r.verdict, 0) + 1
    finally:
        gc.unfreeze()
    shares = {c: {v: k / ledgers for v, k in by.items()} for c, by in counts.items()}
    return Simulated(scenario, ledgers, errors, shares,
                     {s.claim: (units(s, 1), units(s, 2) if s.has_replication else 0) for s in tested})


def ledger(specs: list[ClaimSpec], effects: dict[str, float], rng: np.random.Generator,
           spread: float = 0.5) -> list[ClaimResult]:
    """One simulated ledger: look 1, Holm, look 2 for the claims it leaves inconclusive, Holm across both."""
    first = control([_decided(s, effects[s.claim], units(s, 1), rng, spread) for s in specs])

    def look_two(spec: ClaimSpec, *_) -> ClaimResult:
        return _decided(spec, effects[spec.claim], units(spec, 2), rng, spread)

    return with_second_look(first, "simulated", {}, evaluate=look_two)


def _decided(spec: ClaimSpec, effect: float, n: int, rng: np.random.Generator, spread: float) -> ClaimResult:
    values = draw(spec, effect, n, rng, spread)
    statistic = from_values(values, "simulated unit", value_range(spec.statistics[spec.primary]))
    return decide(spec, {spec.primary: statistic}, "simulated")


def markdown(results: list[Simulated], commit: str, day: str) -> list[str]:
    """The docs' table: the familywise error of each scenario, then per claim its units and the share
    of ledgers with each final verdict under `beyond_margin` (the power) and `at_margin`."""
    by = {r.scenario: r for r in results}
    lines = [f"Simulated {day} at commit {commit} (`headlab.reproduce.simulate`), one-sided 0.025 per test, "
             "Holm across both looks with each spec's alpha plan:", "",
             "| scenario | ledgers | familywise error | 95 % interval |", "|---|---|---|---|"]
    from scipy import stats

    for r in results:
        ci = stats.binomtest(r.familywise_errors, r.ledgers).proportion_ci(0.95, method="exact")
        lines.append(f"| {r.scenario} | {r.ledgers} | {r.fwer:.3f} | [{ci.low:.3f}, {ci.high:.3f}] |")
    power, margin = by.get("beyond_margin"), by.get("at_margin")
    if power is None:
        return lines
    lines += ["", "| claim | units (look 1 / look 2) | supported (power) beyond the margin | any decisive verdict at the margin |",
              "|---|---|---|---|"]
    for claim, (n1, n2) in power.units.items():
        wrong = sum(v for k, v in margin.verdicts[claim].items() if k in DECISIVE) if margin else math.nan
        lines.append(f"| {claim} | {n1} / {n2 or '-'} | {power.share(claim, SUPPORTED):.2f} | {wrong:.3f} |")
    return lines
