"""Division-of-labour scores: hand-made tables with known JS means, role counts and matchings."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from headlab.cli.aggregate import main as aggregate_main
from headlab.sweep.division import (
    DIVISION_CSV,
    division_table,
    layer_mean_js,
    layer_role_entropy,
    role_entropy_bits,
    seed_pair_same_role,
)
from headlab.sweep.runs import Run
from headlab.store import SweepDir


def metric_rows(step: int, roles_per_layer: list[list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{"step": step, "layer": layer, "head": head, "metric": "role", "value": float(role)}
                         for layer, roles in enumerate(roles_per_layer) for head, role in enumerate(roles)])


def pair_rows(step: int, matrices: list[np.ndarray]) -> pd.DataFrame:
    """Both orders (a, b) and (b, a) and the diagonal, as the measurement writes them."""
    return pd.DataFrame([{"step": step, "layer": layer, "head_a": a, "head_b": b, "metric": "js", "value": float(m[a, b])}
                         for layer, m in enumerate(matrices) for a in range(len(m)) for b in range(len(m))])


def symmetric(upper: dict[tuple[int, int], float], n: int) -> np.ndarray:
    m = np.zeros((n, n))
    for (a, b), v in upper.items():
        m[a, b] = m[b, a] = v
    return m


# ---------------------------------------------------------------- role entropy
@pytest.mark.parametrize("roles, bits", [
    ([0, 1, 2, 3], 2.0),                                      # four heads, four roles: log2 4
    ([5, 5, 5, 5], 0.0),                                      # one role for all
    ([0, 0, 1, 1], 1.0),
    ([0, 0, 0, 1], -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25))),  # 0.811
    ([0, math.nan, 1], 1.0),                                  # an unmeasured head is left out
])
def test_role_entropy_bits_of_known_counts(roles, bits):
    assert role_entropy_bits(roles) == pytest.approx(bits, abs=1e-12)


def test_role_entropy_without_any_role_is_nan():
    assert math.isnan(role_entropy_bits([math.nan, math.nan]))
    assert math.isnan(layer_role_entropy(None))


def test_layer_role_entropy_is_the_last_step_mean_over_layers():
    table = pd.concat([metric_rows(0, [[0, 1, 2, 3], [0, 1, 2, 3]]),      # earlier step: ignored
                       metric_rows(40, [[0, 0, 1, 1], [2, 2, 2, 2]])])    # 1 bit and 0 bits
    other = pd.DataFrame([{"step": 40, "layer": 0, "head": 0, "metric": "entropy_norm", "value": 3.0}])
    assert layer_role_entropy(pd.concat([table, other])) == pytest.approx(0.5)


# ---------------------------------------------------------------- JS within a layer
def test_layer_mean_js_averages_pairs_once_then_layers_at_the_last_step():
    layer0 = symmetric({(0, 1): 0.1, (0, 2): 0.2, (1, 2): 0.3}, 3)      # mean 0.2
    layer1 = symmetric({(0, 1): 0.4, (0, 2): 0.4, (1, 2): 0.4}, 3)      # mean 0.4
    early = symmetric({(0, 1): 0.6, (0, 2): 0.6, (1, 2): 0.6}, 3)
    table = pd.concat([pair_rows(0, [early, early]), pair_rows(40, [layer0, layer1])])
    assert layer_mean_js(table) == pytest.approx(0.3)


def test_layer_mean_js_of_identical_and_disjoint_heads():
    """JS of the measured smoothing-free extremes: identical heads 0, disjoint heads ln 2."""
    p, q = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    disjoint = float(stats.entropy(p, (p + q) / 2) / 2 + stats.entropy(q, (p + q) / 2) / 2)
    assert disjoint == pytest.approx(math.log(2))
    table = pair_rows(10, [symmetric({(0, 1): 0.0}, 2), symmetric({(0, 1): disjoint}, 2)])
    assert layer_mean_js(table) == pytest.approx(math.log(2) / 2)


def test_layer_mean_js_is_nan_without_pairs():
    assert math.isnan(layer_mean_js(None))
    assert math.isnan(layer_mean_js(pair_rows(0, [np.zeros((1, 1))])))   # a single-head layer


# ---------------------------------------------------------------- cross-seed reproducibility
def test_seed_pair_same_role_averages_layers_and_drops_failed_matches():
    matches = pd.DataFrame([
        {"layer": 0, "job_a": "0", "job_b": "1", "same_role": 1.0, "same_role_baseline": 0.25, "error": ""},
        {"layer": 1, "job_a": "0", "job_b": "1", "same_role": 0.5, "same_role_baseline": 0.35, "error": ""},
        {"layer": 0, "job_a": "0", "job_b": "2", "same_role": 0.25, "same_role_baseline": 0.25, "error": ""},
        {"layer": 1, "job_a": "0", "job_b": "2", "same_role": math.nan, "same_role_baseline": math.nan,
         "error": "head counts differ"},
    ])
    pairs = seed_pair_same_role(matches).set_index(["job_a", "job_b"])
    assert pairs.loc[("0", "1"), "same_role"] == pytest.approx(0.75)
    assert pairs.loc[("0", "1"), "same_role_baseline"] == pytest.approx(0.30)
    assert pairs.loc[("0", "2"), "same_role"] == pytest.approx(0.25)
    assert len(pairs) == 2


def _run(job: str, roles: list[float], js: float) -> Run:
    n = len(roles)
    js_matrix = np.where(np.eye(n, dtype=bool), 0.0, js)
    return Run(job, Path(job), "completed", head_metrics=metric_rows(40, [roles]), head_pairs=pair_rows(40, [js_matrix]))


def test_division_table_means_and_t_intervals_over_seeds():
    runs = {"posenc=none": [_run("0", [0, 0, 1, 1], 0.1), _run("1", [0, 1, 2, 3], 0.2), _run("2", [5, 5, 5, 5], 0.3)],
            "posenc=rope": [_run("3", [0, 1, 2, 3], 0.5)]}
    matches = pd.DataFrame([
        {"config": "posenc=none", "layer": 0, "job_a": a, "job_b": b, "same_role": s, "same_role_baseline": 0.25, "error": ""}
        for a, b, s in (("0", "1", 0.25), ("0", "2", 0.5), ("1", "2", 0.75))])
    tags = pd.DataFrame({"job": ["0", "1", "2", "3"], "config_label": ["none"] * 3 + ["rope"],
                         "model.pos_encoding": ["none"] * 3 + ["rope"]})
    table = division_table(runs, matches, tags).set_index("config")
    none = table.loc["posenc=none"]
    assert none["model.pos_encoding"] == "none" and none["n_seeds"] == 3 and none["n_seed_pairs"] == 3
    assert none["role_entropy_max_bits"] == pytest.approx(2.0)

    def t_interval(values, low, high):
        x = np.asarray(values)
        half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
        return x.mean(), max(x.mean() - half, low), min(x.mean() + half, high)

    for name, values, bounds in (("js_within_layer", [0.1, 0.2, 0.3], (0, math.log(2))),
                                 ("role_entropy_bits", [1.0, 2.0, 0.0], (0, 2.0)),
                                 ("same_role", [0.25, 0.5, 0.75], (0, 1))):
        expected = t_interval(values, *bounds)
        got = (none[f"{name}_mean"], none[f"{name}_ci95_low"], none[f"{name}_ci95_high"])
        assert got == pytest.approx(expected), name
    assert none["same_role_baseline_mean"] == pytest.approx(0.25)
    rope = table.loc["posenc=rope"]                      # one seed: a mean, no interval, no pairs
    assert rope["js_within_layer_mean"] == pytest.approx(0.5) and math.isnan(rope["js_within_layer_ci95_low"])
    assert rope["role_entropy_bits_mean"] == pytest.approx(2.0)
    assert rope["n_seed_pairs"] == 0 and math.isnan(rope["same_role_mean"])


# ---------------------------------------------------------------- the fake sweep folder (conftest)
def test_aggregate_writes_one_division_row_per_config(aggregated):
    result, _ = aggregated
    table = pd.read_csv(result.out_dir / DIVISION_CSV).set_index("model.n_heads")
    assert sorted(table.index) == [2, 4]
    two, four = table.loc[2], table.loc[4]
    # final js = 0.01 * 40 off the diagonal; heads of type k have role k % 5, distinct within a layer
    assert two["js_within_layer_mean"] == pytest.approx(0.4) and four["js_within_layer_mean"] == pytest.approx(0.4)
    assert two["role_entropy_bits_mean"] == pytest.approx(1.0) and four["role_entropy_bits_mean"] == pytest.approx(2.0)
    # the matching undoes each seed's permutation of heads: every matched head keeps its role
    assert two["same_role_mean"] == pytest.approx(1.0) and four["same_role_mean"] == pytest.approx(1.0)
    assert two["same_role_baseline_mean"] == pytest.approx(0.5) and four["same_role_baseline_mean"] == pytest.approx(0.25)
    assert (two["n_seeds"], two["n_seed_pairs"], four["n_seeds"], four["n_seed_pairs"]) == (3, 3, 2, 1)


def test_headlab_aggregate_prints_the_division_table(sweep_dir, tmp_path, capsys):
    assert aggregate_main([str(sweep_dir), "figures=false", f"out={tmp_path / 'agg'}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    division = lines[next(i for i, line in enumerate(lines) if line.startswith("division of labour")):]
    row = next(line for line in division if line.startswith("model.n_heads=4"))
    assert row.split()[1] == "2"                           # seeds
    assert "0.400 [0.400, 0.400]" in row and "2.00 [2.00, 2.00] (2.00)" in row and "1.00 (0.25)" in row


def test_a_run_without_head_tables_is_not_counted_as_a_seed_of_the_scores(sweep_dir, tmp_path):
    import shutil

    from headlab.store import HEAD_METRICS, HEAD_PAIRS
    from headlab.sweep import aggregate_sweep

    shutil.rmtree(sweep_dir / "0" / HEAD_METRICS)
    shutil.rmtree(sweep_dir / "0" / HEAD_PAIRS)
    aggregate_sweep(SweepDir(sweep_dir), tmp_path / "out", figures=False)
    two = pd.read_csv(tmp_path / "out" / DIVISION_CSV).set_index("model.n_heads").loc[2]
    assert (two["n_seeds"], two["n_seed_pairs"]) == (2, 1)          # jobs 1 and 2 only
    assert two["role_entropy_bits_mean"] == pytest.approx(1.0) and two["same_role_mean"] == pytest.approx(1.0)


def test_the_printed_table_shows_a_dash_where_a_score_has_no_value():
    from headlab.sweep.division import format_division

    table = division_table({"posenc=rope": [_run("3", [0, 1, 2, 3], 0.5)]}, pd.DataFrame(),
                           pd.DataFrame({"job": ["3"], "config_label": ["model.pos_encoding=rope"]}))
    row = format_division(table).splitlines()[-1].split()
    assert row == ["model.pos_encoding=rope", "1", "0.500", "2.00", "(2.00)", "-"]   # one seed: no interval, no pair


def test_conditional_roles_get_their_own_entropy_column():
    at_y = metric_rows(40, [[0, 1, 2, 3]]).assign(metric="role@y")             # 2 bits from the y queries
    with_y = Run("0", Path("0"), "completed", head_metrics=pd.concat([metric_rows(40, [[5, 5, 5, 5]]), at_y]))
    without = Run("1", Path("1"), "completed", head_metrics=metric_rows(40, [[5, 5, 0, 0]]))
    tags = pd.DataFrame({"job": ["0", "1"], "config_label": ["a", "b"]})
    table = division_table({"a": [with_y], "b": [without]}, pd.DataFrame(), tags).set_index("config")
    assert table.loc["a", "role_entropy_bits_mean"] == pytest.approx(0.0)
    assert table.loc["a", "role_entropy_bits@y_mean"] == pytest.approx(2.0)
    assert table.loc["b", "role_entropy_bits_mean"] == pytest.approx(1.0)
    assert math.isnan(table.loc["b", "role_entropy_bits@y_mean"])              # not measured in that run
