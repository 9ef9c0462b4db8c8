"""C2 on the induction LM: the shipped spec decided on hand-built head tables (per seed, the
article's three pattern types counted per layer, in the 4-head models of a 2/4/8-head sweep),
against intervals computed here with scipy."""

from __future__ import annotations

import pandas as pd
import pytest
from scipy import stats

from headlab.reproduce.spec import load_spec
from headlab.reproduce.statistics import table_statistic
from headlab.reproduce.verdict import ABSENT, INCONCLUSIVE, NOT_TESTABLE, decide
from tests.reproduce.test_verdicts import SPECS

SPEC = load_spec(SPECS / "c02_split_roles.yaml")
L, D, U, X = "local_diagonal", "distant_points", "uniform", "untyped"


def _heads(seeds: dict[int, tuple[list[str], list[str]]], n_heads: int = 4) -> pd.DataFrame:
    """A sweep_heads.csv of 2-layer LM runs: per seed the final types of layer 0 and layer 1."""
    return pd.DataFrame([{"job": f"{n_heads}-{seed}", "seed": seed, "model.n_heads": n_heads, "usable": True, "layer": layer,
                          "head": head, "final_type": kind}
                         for seed, layers in seeds.items() for layer, kinds in enumerate(layers)
                         for head, kind in enumerate(kinds)])


def _decided(table: pd.DataFrame):
    return decide(SPEC, {name: table_statistic(s, table) for name, s in SPEC.statistics.items()}, "hand-built")


def test_the_spec_counts_types_per_layer_with_seeds_as_units():
    table = _heads({0: ([L, U, X, X], [D, D, U, X]),    # 2 + 2 types: 2.0
                    1: ([L, L, X, X], [D, D, D, X]),    # 1 + 1: 1.0
                    2: ([L, U, D, X], [D, X, X, X]),    # 3 + 1: 2.0
                    3: ([L, X, X, X], [D, D, X, X])})   # 1 + 1: 1.0
    eight = _heads({seed: ([L, U, D] + [X] * 5, [D, U, L] + [X] * 5) for seed in range(4)}, n_heads=8)  # 3 types a layer: not read
    table = pd.concat([table, eight], ignore_index=True)
    types = table_statistic(SPEC.statistics["types"], table)
    per_seed = [2.0, 1.0, 2.0, 1.0]
    low, high = stats.t.interval(0.95, 3, loc=1.5, scale=stats.sem(per_seed))
    assert (types.mean, types.n) == (1.5, 4) and types.ci_low == pytest.approx(max(low, 0.0)) and types.ci_high == pytest.approx(high)
    assert table_statistic(SPEC.statistics["types_layer0"], table).mean == pytest.approx((2 + 1 + 3 + 1) / 4)
    formed = table_statistic(SPEC.statistics["formed"], table)
    assert formed.mean == pytest.approx((3 / 8 + 5 / 8 + 3 / 8 + 3 / 8) / 4)  # local or distant heads of 8
    result = _decided(table)
    assert result.verdict == INCONCLUSIVE and "straddles the margin 2" in result.reason


def test_one_type_per_layer_in_most_seeds_is_absent():
    one, two = ([L, L, X, X], [D, D, D, X]), ([L, U, X, X], [D, D, X, X])   # 1.0 and 1.5 types per layer
    table = _heads({seed: (two if seed in (2, 6) else one) for seed in range(8)})
    result = _decided(table)
    values = [1.5 if s in (2, 6) else 1.0 for s in range(8)]
    low, high = stats.t.interval(0.95, 7, loc=sum(values) / 8, scale=stats.sem(values))
    s = result.statistics["types"]
    assert s.ci_low == pytest.approx(low) and s.ci_high == pytest.approx(high) and low < 1 < high < 2
    assert result.verdict == ABSENT  # holds no split (1 type a layer) and excludes the margin; the range ends at 0
    assert result.p_value == pytest.approx(stats.ttest_1samp(values, 2.0, alternative="less").pvalue)


def test_uniform_heads_alone_do_not_make_the_claim_testable():
    table = _heads({seed: ([U, U, X, X], [U, X, X, U if seed % 2 else X]) for seed in range(6)})  # no pattern head anywhere
    result = _decided(table)
    assert result.verdict == NOT_TESTABLE and result.reason.startswith("prerequisite `formed.ci_low > 0`")


def test_every_seed_alike_gives_no_interval_and_no_verdict():
    table = _heads({seed: ([L, L, X, X], [D, D, D, X]) if seed % 2 else ([L, X, X, X], [D, D, X, X]) for seed in range(6)})
    result = _decided(table)  # 1.0 type per layer in every seed: the t-interval is undefined, not [1, 1]
    assert result.verdict == INCONCLUSIVE and result.reason.startswith("no interval: types 1 [nan, nan]")
