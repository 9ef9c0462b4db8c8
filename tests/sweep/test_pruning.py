"""sweep_prune*.csv on hand-made prune.json files with hand-computed means and intervals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from headlab.cli.aggregate import main as aggregate_main
from headlab.sweep.pruning import format_prune, prune_tables, write_sweep_prune
from headlab.sweep.runs import Run


def entry(fraction: float, test: tuple[float, float], speedup: tuple[float, float] | None, ranking: str = "ablation",
          n_heads: int = 8) -> dict:
    """A prune.json entry as headlab-prune writes it (only the fields the table reads, plus some it does not)."""
    out = {"checkpoint": "x.ckpt", "step": 99, "settings": {"ranking": ranking, "finetune_steps": 0, "max_drop": 0.005},
           "heads_removed": [], "n_heads": [n_heads, round(n_heads * (1 - fraction))], "n_params": [1000, 900],
           "fraction_heads_pruned": fraction, "fraction_params_pruned": fraction / 4,
           "val_acc": [0.8, 0.8 - fraction / 100], "test_acc": list(test)}
    if speedup is not None:
        out["speedup"] = {"batch_1": speedup[0], "batch_64": speedup[1], "rounds": 30, "threads": 1, "seq": 64}
    return out


def make_run(root: Path, job: int, n_heads: int, seed: int, report: dict | str | None, reason: str = "") -> Run:
    run_dir = root / str(job)
    run_dir.mkdir(parents=True)
    if isinstance(report, dict):
        (run_dir / "prune.json").write_text(json.dumps(report))
    elif isinstance(report, str):
        (run_dir / "prune.json").write_text(report)
    return Run(str(job), run_dir, "completed", reason, overrides=[f"model.n_heads={n_heads}", f"seed={seed}"],
               summary={"swept": {"seed": seed}})


# 8 heads, 3 seeds: heads pruned 0.25, 0.375, 0.125; test drop 0.002, 0.004, 0.0; speed-up b64 1.2, 1.3, 1.1.
EIGHT = [entry(0.25, (0.80, 0.798), (1.05, 1.2)), entry(0.375, (0.82, 0.816), (1.10, 1.3)),
         entry(0.125, (0.79, 0.79), (1.00, 1.1))]


@pytest.fixture
def hand_sweep(tmp_path) -> tuple[dict[str, list[Run]], pd.DataFrame]:
    runs = [make_run(tmp_path, s, 8, s, {"ablation-ft0": EIGHT[s]}) for s in range(3)]
    runs[0] = make_run(tmp_path / "again", 0, 8, 0, {"ablation-ft0": EIGHT[0],
                                                     "random-ft0": entry(0.125, (0.80, 0.70), None, ranking="random")})
    runs += [make_run(tmp_path, 3, 4, 0, {"ablation-ft0": entry(0.25, (0.7, 0.69), (1.02, 1.04), n_heads=4)}),
             make_run(tmp_path, 4, 4, 1, None),                                       # never pruned
             make_run(tmp_path, 5, 4, 2, "{not json"),                                # unreadable: left out
             make_run(tmp_path, 6, 4, 3, {"ablation-ft0": entry(0.5, (0.7, 0.1), (9.0, 9.0))}, reason="diverged")]
    groups: dict[str, list[Run]] = {}
    for r in runs:
        groups.setdefault(r.config, []).append(r)
    tags = pd.DataFrame({"job": [r.job for r in runs], "config_label": [f"model.n_heads={h}" for h in (8, 8, 8, 4, 4, 4, 4)],
                         "model.n_heads": [8, 8, 8, 4, 4, 4, 4]})
    return groups, tags


def test_one_row_per_usable_job_and_label(hand_sweep):
    per_run, _ = prune_tables(*hand_sweep)
    assert list(zip(per_run["label"], per_run["job"])) == [("ablation-ft0", "0"), ("ablation-ft0", "1"), ("ablation-ft0", "2"),
                                                           ("ablation-ft0", "3"), ("random-ft0", "0")]
    assert per_run["model.n_heads"].tolist() == [8, 8, 8, 4, 8] and per_run["seed"].tolist() == [0, 1, 2, 0, 0]
    assert per_run["fraction_heads_pruned"].tolist() == [0.25, 0.375, 0.125, 0.25, 0.125]
    assert per_run["n_heads_before"].tolist() == [8, 8, 8, 4, 8] and per_run["n_heads_after"].tolist() == [6, 5, 7, 3, 7]
    assert per_run["test_acc_drop"].tolist() == pytest.approx([0.002, 0.004, 0.0, 0.01, 0.1])
    assert per_run["val_acc_drop"].tolist() == pytest.approx([0.0025, 0.00375, 0.00125, 0.0025, 0.00125])
    assert per_run["speedup_b64"].tolist()[:4] == [1.2, 1.3, 1.1, 1.04] and math.isnan(per_run["speedup_b64"].iloc[4])
    assert per_run["ranking"].tolist()[-1] == "random" and set(per_run["max_drop"]) == {0.005}


def test_per_config_means_and_t_intervals(hand_sweep):
    _, per_config = prune_tables(*hand_sweep)
    assert list(zip(per_config["model.n_heads"], per_config["label"])) == [(4, "ablation-ft0"), (8, "ablation-ft0"),
                                                                          (8, "random-ft0")]
    eight = per_config.iloc[1]
    assert eight["n_seeds"] == 3 and eight["seeds"] == "0 1 2" and eight["n_heads_before"] == 8
    for column, values in (("fraction_heads_pruned", [0.25, 0.375, 0.125]), ("test_acc_drop", [0.002, 0.004, 0.0]),
                           ("speedup_b64", [1.2, 1.3, 1.1])):
        half = stats.t.ppf(0.975, 2) * np.std(values, ddof=1) / math.sqrt(3)
        assert eight[f"{column}_mean"] == pytest.approx(np.mean(values))
        assert eight[f"{column}_ci95_low"] == pytest.approx(max(np.mean(values) - half, -1.0 if column == "test_acc_drop" else 0))
        assert eight[f"{column}_ci95_high"] == pytest.approx(np.mean(values) + half)
    assert eight["speedup_b1_mean"] == pytest.approx(1.05)
    four = per_config.iloc[0]  # one seed: a mean, no interval
    assert four["n_seeds"] == 1 and four["fraction_heads_pruned_mean"] == 0.25 and math.isnan(four["fraction_heads_pruned_ci95_low"])
    random = per_config.iloc[2]
    assert random["n_seeds"] == 1 and math.isnan(random["speedup_b64_mean"])  # pruned with speedup=false
    text = format_prune(per_config)
    assert "random-ft0" in text and "0.250 [" in text


def test_nothing_written_without_prune_json(tmp_path):
    runs = [make_run(tmp_path, 0, 8, 0, None)]
    tags = pd.DataFrame({"job": ["0"], "config_label": ["model.n_heads=8"]})
    assert write_sweep_prune(tmp_path / "out", {runs[0].config: runs}, tags) == []
    assert not (tmp_path / "out").exists()


def test_headlab_aggregate_writes_and_prints_the_prune_table(sweep_dir, capsys):
    # the conftest sweep: jobs 0-3 are seeds 0-3 of n_heads=2 (usable), 8 is unusable (corrupt parquet)
    fractions = {0: 0.5, 1: 0.5, 2: 0.0, 8: 0.5}
    for job, fraction in fractions.items():
        report = {"ablation-ft0": entry(fraction, (0.9, 0.89), (1.0, 1.0 + fraction), n_heads=4)}
        (sweep_dir / str(job) / "prune.json").write_text(json.dumps(report))
    assert aggregate_main([str(sweep_dir), "figures=false"]) == 0
    out = capsys.readouterr().out
    per_run = pd.read_csv(sweep_dir / "aggregate" / "sweep_prune_runs.csv")
    assert per_run["job"].tolist() == [0, 1, 2]  # job 8 is not usable
    per_config = pd.read_csv(sweep_dir / "aggregate" / "sweep_prune.csv")
    assert len(per_config) == 1 and per_config["fraction_heads_pruned_mean"].item() == pytest.approx(1 / 3)
    assert per_config["speedup_b64_mean"].item() == pytest.approx(4 / 3)
    assert "head pruning (headlab-prune per job" in out and "0.333 [" in out


def test_the_figure_shows_each_seed_and_the_mean_beside_the_articles_range(hand_sweep, tmp_path):
    from headlab.plots.prune_sweep import build_prune_sweep_figure

    per_run, _ = prune_tables(*hand_sweep)
    fig = build_prune_sweep_figure(per_run)
    heads, drop, speed = fig.axes
    assert [t.get_text() for t in heads.get_xticklabels()] == ["model.n_heads=4\nablation-ft0", "model.n_heads=8\nablation-ft0",
                                                               "model.n_heads=8\nrandom-ft0"]
    seeds = [line for line in heads.get_lines() if line.get_marker() == "o"]
    assert [sorted(line.get_ydata()) for line in seeds] == [[0.25], [0.125, 0.25, 0.375], [0.125]]
    means = [line for line in speed.get_lines() if line.get_marker() == "s"]
    assert [float(m.get_ydata()[0]) for m in means] == pytest.approx([1.04, 1.2])  # the random label has no speed-up
    band = heads.patches[0]  # axhspan: a Rectangle from y to y + height
    assert (band.get_y(), band.get_y() + band.get_height()) == pytest.approx((0.2, 0.3)) and not drop.patches
    written = write_sweep_prune(tmp_path, *hand_sweep, figures=True)
    assert [p.name for p in written] == ["sweep_prune_runs.csv", "sweep_prune.csv", "prune_sweep.png"]
    assert written[-1].parent.name == "figures" and written[-1].stat().st_size > 0


# sweep_prune_runs.csv's columns before prune.selection existed (job tags sit between config and label)
RUNS_COLUMNS = ["label", "ranking", "finetune_steps", "max_drop", "checkpoint_step", "n_heads_before", "n_heads_after",
                "fraction_heads_pruned", "fraction_params_pruned", "val_acc_before", "val_acc_after", "val_acc_drop",
                "test_acc_before", "test_acc_after", "test_acc_drop", "speedup_b1", "speedup_b64"]
SELECTION_COLUMNS = ["selection", "heldout_acc_before", "heldout_acc_after", "heldout_acc_drop"]


def test_the_selection_and_the_held_out_drop_are_added_columns(tmp_path):
    """A val_half entry carries its selection and half B's accuracy; an entry written before the
    setting reads as val with no held-out reading; the columns of before keep their order and values."""
    half = {**entry(0.25, (0.80, 0.79), (1.0, 1.1)), "selection": "val_half", "heldout_acc": [0.81, 0.78],
            "heldout_acc_drop": 0.03, "test_acc_drop": 0.01}
    runs = [make_run(tmp_path, 0, 8, 0, {"ablation-ft0": EIGHT[0], "ablation-valhalf-ft0": half}),
            make_run(tmp_path, 1, 8, 1, {"ablation-valhalf-ft0": {**half, "heldout_acc": [0.8, 0.8]}})]
    tags = pd.DataFrame({"job": ["0", "1"], "config_label": ["model.n_heads=8"] * 2, "model.n_heads": [8, 8]})
    per_run, per_config = prune_tables({runs[0].config: runs}, tags)
    columns = list(per_run.columns)
    assert columns[columns.index("label"):] == RUNS_COLUMNS + SELECTION_COLUMNS
    assert per_run["label"].tolist() == ["ablation-ft0", "ablation-valhalf-ft0", "ablation-valhalf-ft0"]
    assert per_run["selection"].tolist() == ["val", "val_half", "val_half"]
    assert math.isnan(per_run["heldout_acc_drop"].iloc[0]) and math.isnan(per_run["heldout_acc_before"].iloc[0])
    assert per_run["heldout_acc_drop"].tolist()[1:] == pytest.approx([0.03, 0.0])
    assert per_run["test_acc_drop"].tolist() == pytest.approx([0.002, 0.01, 0.01])
    old, _ = prune_tables({runs[0].config: runs[:1]}, tags)
    pd.testing.assert_frame_equal(old[old.label == "ablation-ft0"][RUNS_COLUMNS],
                                  per_run[per_run.label == "ablation-ft0"][RUNS_COLUMNS])
    by_label = per_config.set_index("label")
    assert by_label.loc["ablation-valhalf-ft0", "selection"] == "val_half"
    assert by_label.loc["ablation-valhalf-ft0", "heldout_acc_drop_mean"] == pytest.approx(0.015)
    assert by_label.loc["ablation-ft0", "selection"] == "val" and math.isnan(by_label.loc["ablation-ft0", "heldout_acc_drop_mean"])
