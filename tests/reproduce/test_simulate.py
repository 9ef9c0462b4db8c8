"""The whole pipeline's familywise error, by simulated ledgers through the real spec -> statistic ->
interval -> verdict -> Holm across looks (`headlab.reproduce.simulate`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from headlab.reproduce.simulate import SCENARIOS, draw, is_false, simulate, true_effect, units
from headlab.reproduce.spec import load_specs
from headlab.reproduce.verdict import ABSENT, DIRECTION_ONLY, REVERSED, SMALLER, SUPPORTED
from headlab.stats.decisions import FAMILYWISE

SPECS = load_specs(Path(__file__).resolve().parents[2] / "conf" / "reproduce")
BY_CLAIM = {s.claim: s for s in SPECS}


def _within(errors: int, ledgers: int, level: float = FAMILYWISE) -> bool:
    """The familywise error is at most `level` within Monte Carlo error: an exact binomial test of
    "more than level" does not reject at 0.01."""
    return stats.binomtest(errors, ledgers, level, alternative="greater").pvalue > 0.01


@pytest.mark.parametrize("scenario", ["no_effect", "at_margin"])
def test_the_familywise_error_of_the_pipeline_is_at_most_five_percent(scenario):
    result = simulate(SPECS, scenario, ledgers=200, seed=7)
    assert result.ledgers == 200 and len(result.verdicts) == 18
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


def test_units_are_seeds_or_disjoint_seed_pairs_and_a_bound_gives_no_spread():
    assert units(BY_CLAIM["C8"], 1) == 24 and units(BY_CLAIM["C14"], 1) == 4 and units(BY_CLAIM["C14"], 2) == 8
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
    """The documented run (docs/reproduce.md, "The pipeline calibrated by simulation")."""
    result = simulate(SPECS, scenario, ledgers=2000, seed=1)
    assert _within(result.familywise_errors, result.ledgers)
    if scenario == "beyond_margin":  # every claim one per-unit SD beyond its margin: some power, never a false call
        assert result.familywise_errors == 0 and result.share("C3", SUPPORTED) > 0.9  # 28 seeds
        # power grows with the units: 28 seeds (C3) > 16 (C5) > 8 (C13)
        assert result.share("C3", SUPPORTED) > result.share("C5", SUPPORTED) > result.share("C13", SUPPORTED)
