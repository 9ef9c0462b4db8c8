"""The whole pipeline's familywise error, by simulated ledgers through the real spec -> statistic ->
interval -> verdict -> Holm across looks (`headlab.reproduce.simulate`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

from headlab.reproduce.simulate import SCENARIOS, draw, is_false, simulate, at_scale, true_effect, units
from headlab.reproduce.spec import load_spec, load_specs
from headlab.reproduce.verdict import ABSENT, DIRECTION_ONLY, REVERSED, SMALLER, SUPPORTED
from headlab.stats.decisions import FAMILYWISE

SPECS = load_specs(Path(__file__).resolve().parents[2] / "conf" / "reproduce")
BY_CLAIM = {s.claim: s for s in SPECS}
CPU_PLAN = at_scale(SPECS, "cpu")   # the family of a make reproduce-cpu ledger


def _within(errors: int, ledgers: int, level: float = FAMILYWISE) -> bool:
    """The familywise error is at most `level` within Monte Carlo error: an exact binomial test of
    "more than level" does not reject at 0.01."""
    return stats.binomtest(errors, ledgers, level, alternative="greater").pvalue > 0.01


@pytest.mark.parametrize("scenario", ["no_effect", "at_margin"])
def test_the_familywise_error_of_the_pipeline_is_at_most_five_percent(scenario):
    result = simulate(SPECS, scenario, ledgers=200, seed=7)
    assert result.ledgers == 200 and len(result.verdicts) == 18
    assert _within(result.familywise_errors, result.ledgers), (scenario, result.fwer)


def test_a_ledger_tests_the_claims_its_scale_runs_and_the_computed_one():
    # since the second ledger of 2026-12-04 the cpu plan leaves out C7, C8, C14, C15 and C16 (40-200 seeds to decide)
    assert [s.claim for s in CPU_PLAN] == ["C1", "C2", "C3", "C4", "C5", "C6", "C9", "C10", "C11", "C12", "C13", "C17", "C18"]
    assert BY_CLAIM["C1"].evidence.kind == "computed" and "cpu" not in BY_CLAIM["C1"].has_scale
    assert at_scale(SPECS, "quick") == SPECS   # the quick scale runs every claim


@pytest.mark.parametrize("scenario", ["no_effect", "at_margin"])
def test_the_familywise_error_of_the_cpu_plans_family_is_at_most_five_percent(scenario):
    result = simulate(CPU_PLAN, scenario, ledgers=200, seed=7)
    assert len(result.verdicts) == 13 and "C8" not in result.verdicts
    assert _within(result.familywise_errors, result.ledgers), (scenario, result.fwer)


def test_which_verdicts_are_false_for_a_known_effect():
    c8, c14 = BY_CLAIM["C8"], BY_CLAIM["C14"]   # margin 0.015 above 0; kappa margin 0.5 below 1
    assert is_false(SUPPORTED, c8, 0.015) and not is_false(SUPPORTED, c8, 0.02)
    assert is_false(SMALLER, c8, 0.015) and not is_false(SMALLER, c8, 0.0)
    assert is_false(DIRECTION_ONLY, c8, 0.0) and not is_false(DIRECTION_ONLY, c8, 0.01)
    assert is_false(REVERSED, c8, 0.0) and not is_false(REVERSED, c8, -0.001)
    assert not is_false(ABSENT, c8, 0.0) and is_false(ABSENT, c8, -0.02)
    assert not is_false(SUPPORTED, c14, 0.3) and is_false(SUPPORTED, c14, 0.5) and not is_false(ABSENT, c14, 1.0)
    assert true_effect(c14, "beyond_margin") == pytest.approx(0.25)


def _c14_with_second_look(tmp_path: Path):
    """C14 given version 6's look 2 (`git show 6fabec9^:conf/reproduce/c14_seeds.yaml`): 16 fresh seeds,
    8 disjoint pairs, alpha 0.0125 + 0.0125. Version 7 ships one look, and no shipped spec has a look 2."""
    path = Path(BY_CLAIM["C14"].path)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    seeds = list(range(2306, 2322))   # version 6's 308-323 are version 7's exploratory seeds
    data["evidence"]["replication"] = {"sweep_name": "lm-roles-rep", "overrides": [
        "seed=" + ",".join(map(str, seeds)), "optim=adamw_constant", "optim.lr=3e-3"]}
    data["seeds"].update(replication=seeds, alpha=[0.0125, 0.0125])
    out = tmp_path / path.name
    out.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return load_spec(out)


def test_units_are_seeds_or_disjoint_seed_pairs_and_a_bound_gives_no_spread(tmp_path):
    # C8: 12 seeds (2000-2011); C14: 6 seeds at look 1 = 3 disjoint pairs, 16 fresh seeds at look 2 = 8 pairs
    c14 = _c14_with_second_look(tmp_path)
    assert units(BY_CLAIM["C8"], 1) == 12 and units(BY_CLAIM["C14"], 1) == 3
    assert c14.has_replication and units(c14, 1) == 3 and units(c14, 2) == 8
    rng = np.random.default_rng(0)
    assert (draw(BY_CLAIM["C14"], 1.0, 5, rng) == 1.0).all()   # kappa 1: every pair gives the same division
    shares = draw(BY_CLAIM["C15"], 0.05, 2000, rng)            # an attention mass: Beta on [0, 1]
    assert shares.min() >= 0 and shares.max() <= 1 and shares.mean() == pytest.approx(0.05, abs=0.005)


def test_an_unknown_scenario_is_one_clear_error():
    with pytest.raises(ValueError, match="scenario 'null': one of no_effect, at_margin, beyond_margin"):
        simulate(SPECS, "null", ledgers=1)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_two_thousand_ledgers_per_scenario(scenario):
    """The documented run (docs/reproduce.md, "The pipeline calibrated by simulation"): the cpu plan's family."""
    result = simulate(CPU_PLAN, scenario, ledgers=2000, seed=1)
    assert _within(result.familywise_errors, result.ledgers)
    if scenario == "beyond_margin":  # every claim one per-unit SD beyond its margin: some power, never a false call
        assert result.familywise_errors == 0 and result.share("C3", SUPPORTED) > 0.5 and result.share("C5", SUPPORTED) > 0.5
        # power grows with the units, among paired differences: 28 seeds (C3, C5) > 16 (C11, C9) > 6 (C13)
        assert [result.units[c] for c in ("C3", "C5", "C11", "C9", "C13")] == [(28, 0), (28, 0), (16, 0), (16, 0), (6, 0)]
        assert min(result.share(c, SUPPORTED) for c in ("C3", "C5")) > result.share("C11", SUPPORTED) > result.share("C13", SUPPORTED)
