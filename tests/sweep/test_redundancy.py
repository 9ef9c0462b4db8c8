"""sweep_redundancy*.csv on hand-made pair tables with known duplicate clusters."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from headlab.store import head_pair_rows
from headlab.sweep.redundancy import redundancy_tables, write_sweep_redundancy
from headlab.sweep.runs import Run

JUST_IN, JUST_OUT = 0.069, 0.070  # the default bar is 0.1 * ln 2 = 0.0693 nats


def blocks(sizes: list[int], within: float = 0.01, between: float = 0.4) -> np.ndarray:
    n = sum(sizes)
    js = np.full((n, n), between)
    start = 0
    for size in sizes:
        js[start:start + size, start:start + size] = within
        start += size
    np.fill_diagonal(js, 0.0)
    return js


def pair_table(job: str, layers_by_step: dict[int, list[np.ndarray]]) -> pd.DataFrame:
    frames = [head_pair_rows(job, step, 0, [{"js": js, "corr": 1.0 - js} for js in layers])
              for step, layers in layers_by_step.items()]
    return pd.concat(frames, ignore_index=True)


def run(job: int, fraction: float, seed: int, last: list[np.ndarray]) -> Run:
    """A completed run whose FIRST measurement has every head a duplicate (a trap: only the last counts)."""
    early = [np.zeros_like(js) for js in last]
    overrides = [f"data.train_fraction={fraction}", f"seed={seed}"]
    return Run(str(job), None, "completed", overrides=overrides, summary={"swept": {"seed": seed}},
               head_pairs=pair_table(str(job), {0: early, 100: last}))


# Two layers of 4 heads. Redundant heads per seed at the last step: 4, 3, 2 (of 8); then 0, 0, 1.
SMALL = [[blocks([2, 2]), blocks([3, 1])],
         [blocks([2, 2]), blocks([2, 1, 1])],
         [blocks([2, 1, 1]), blocks([2, 1, 1], within=JUST_IN)]]
FULL = [[blocks([1, 1, 1, 1]), blocks([1, 1, 1, 1])],
        [blocks([2, 1, 1], within=JUST_OUT), blocks([1, 1, 1, 1])],
        [blocks([1, 1, 1, 1]), blocks([1, 3])]]


@pytest.fixture
def hand_sweep() -> tuple[dict[str, list[Run]], pd.DataFrame]:
    runs = [run(s, 0.05, s, SMALL[s]) for s in range(3)] + [run(3 + s, 1.0, s, FULL[s]) for s in range(3)]
    groups: dict[str, list[Run]] = {}
    for r in runs:
        groups.setdefault(r.config, []).append(r)
    tags = pd.DataFrame({"job": [r.job for r in runs], "config_label": [r.config for r in runs],
                         "data.train_fraction": [0.05] * 3 + [1.0] * 3})
    return groups, tags


def test_per_run_counts_at_the_last_measurement(hand_sweep):
    per_run, _ = redundancy_tables(*hand_sweep)
    assert per_run["job"].tolist() == ["0", "1", "2", "3", "4", "5"]
    assert per_run["redundant_heads"].tolist() == [4, 3, 2, 0, 0, 2]
    assert per_run["step"].tolist() == [100] * 6 and per_run["n_heads"].tolist() == [8] * 6
    assert per_run["duplicate_fraction"].tolist() == pytest.approx([0.5, 0.375, 0.25, 0.0, 0.0, 0.25])
    assert set(per_run["source"]) == {"head_pairs"}
    assert per_run["min_pair_js"].tolist() == pytest.approx([0.01, 0.01, 0.01, 0.4, JUST_OUT, 0.01])


def test_per_config_mean_and_t_interval_with_the_swept_factor(hand_sweep):
    _, per_config = redundancy_tables(*hand_sweep)
    table = per_config.set_index("data.train_fraction")
    small = table.loc[0.05]
    half = stats.t.ppf(0.975, 2) * np.std([0.5, 0.375, 0.25], ddof=1) / math.sqrt(3)
    assert small["duplicate_fraction_mean"] == pytest.approx(0.375)
    assert small["duplicate_fraction_ci95_low"] == pytest.approx(0.375 - half)
    assert small["duplicate_fraction_ci95_high"] == pytest.approx(0.375 + half)
    assert small["redundant_heads_mean"] == pytest.approx(3.0) and small["n_seeds"] == 3 and small["seeds"] == "0 1 2"
    full = table.loc[1.0]
    assert full["duplicate_fraction_mean"] == pytest.approx(2 / 24)
    assert full["duplicate_fraction_ci95_low"] == 0.0  # clipped to the range a fraction can take
    assert full["js_threshold"] == pytest.approx(0.1 * math.log(2))


def test_summary_fallback_and_nothing_to_write(hand_sweep, tmp_path):
    groups, tags = hand_sweep
    only = groups["data.train_fraction=1.0"][0]
    only.head_pairs = None
    only.summary = {"swept": {"seed": 0}, "redundant_heads": 3, "final_roles": [["a"] * 4, ["b"] * 4], "global_step": 7}
    per_run, _ = redundancy_tables(groups, tags)
    row = per_run.set_index("job").loc["3"]
    assert (row["source"], row["redundant_heads"], row["duplicate_fraction"], row["step"]) == ("summary", 3, 0.375, 7)
    bare = {"c": [Run("0", None, "completed", overrides=["seed=0"])]}
    assert write_sweep_redundancy(tmp_path, bare, tags) == []
    assert list(tmp_path.iterdir()) == []


def test_aggregate_writes_the_tables(aggregated):
    """The conftest sweep: js = 0.01 * step off the diagonal, so at the last step (40) js = 0.4, no
    duplicates, while at step 0 every head would be one (js 0)."""
    result, _ = aggregated
    out = result.out_dir
    assert out / "sweep_redundancy.csv" in result.written
    per_config = pd.read_csv(out / "sweep_redundancy.csv")
    assert sorted(per_config["model.n_heads"]) == [2, 4]
    assert (per_config["duplicate_fraction_mean"] == 0.0).all()
    assert per_config.set_index("model.n_heads")["n_seeds"].to_dict() == {2: 3, 4: 2}
    per_run = pd.read_csv(out / "sweep_redundancy_runs.csv")
    assert per_run["job"].tolist() == [0, 1, 2, 5, 6] and (per_run["step"] == 40).all()



def test_the_calibrated_bar_is_a_quantile_of_the_sweeps_pooled_pairs_and_flags_the_closer_config():
    from headlab.sweep.redundancy import _calibrated, calibrated_bar

    twins = [[[0.0, 0.05, 0.5, 0.5], [0.05, 0.0, 0.5, 0.5], [0.5, 0.5, 0.0, 0.06], [0.5, 0.5, 0.06, 0.0]]]
    apart = [[[0.0, 0.4, 0.5, 0.5], [0.4, 0.0, 0.5, 0.5], [0.5, 0.5, 0.0, 0.45], [0.5, 0.5, 0.45, 0.0]]]
    # 12 pairs pooled: 0.05, 0.06, 0.4, 0.45 and eight 0.5; numpy's linear quantile at 0.25 is 0.4375
    bar = calibrated_bar([twins, apart], quantile=0.25)
    assert bar == pytest.approx(np.quantile([0.05, 0.06, 0.4, 0.45] + [0.5] * 8, 0.25))
    assert _calibrated(twins, bar) == (2.0, 0.5)   # two twin pairs: one head of each is redundant
    assert _calibrated(apart, bar) == (1.0, 0.25)  # only the 0.4 pair lies under the bar
    assert all(math.isnan(v) for v in _calibrated(twins, math.nan))


def test_calibrated_columns_in_the_hand_made_sweep(aggregated):
    result, _ = aggregated
    runs = pd.read_csv(result.out_dir / "sweep_redundancy_runs.csv")
    # every off-diagonal pair is at JS 0.4 at the last step (0.01 x step 40): the bar is 0.4 and, at
    # complete linkage, every layer is one cluster: (n - 1) / n of the heads are redundant
    assert runs["calibrated_js_bar"].tolist() == pytest.approx([0.4] * len(runs))
    by_heads = runs.groupby("n_heads")["calibrated_duplicate_fraction"].unique()
    assert by_heads[4].tolist() == pytest.approx([0.5]) and by_heads[8].tolist() == pytest.approx([0.75])
