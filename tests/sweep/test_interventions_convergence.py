"""convergence.csv (sweep=templates): steps to 95 % of the same seed's free best, hand-made curves."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from headlab.sweep import aggregate_sweep
from headlab.sweep.convergence import CONVERGENCE_CSV, convergence_runs, curve_facts, format_convergence, role_counts
from headlab.sweep.runs import Run
from headlab.store import SweepDir


def curve(pairs: dict[int, float]) -> pd.DataFrame:
    return pd.DataFrame({"step": list(pairs), "val_acc": list(pairs.values())})


def test_curve_facts_first_step_at_target_and_first_best():
    c = curve({25: 0.5, 50: 0.79, 75: 0.8, 100: 0.9, 125: 0.9, 150: 0.85})
    assert curve_facts(c, 0.8) == {"steps_to_target": 75.0, "best_val_acc": 0.9, "best_step": 100.0}
    assert math.isnan(curve_facts(c, 0.95)["steps_to_target"])  # never reached
    assert math.isnan(curve_facts(None, 0.5)["best_val_acc"])


def test_role_counts_of_the_final_roles():
    counts = role_counts([["previous_token", "mixed"], ["mixed", "sink"]])
    assert (counts["previous_token"], counts["mixed"], counts["sink"], counts["broad"]) == (1, 2, 1, 0)


def run(job: str, seed: int, acc: dict[int, float]) -> Run:
    return Run(job, Path(job), "completed", summary={"status": "completed", "swept": {"seed": seed}},
               val_curve=curve(acc))


def test_the_target_is_95_percent_of_the_same_seeds_free_best():
    runs = {"free": [run("0", 0, {10: 0.5, 20: 0.8}), run("1", 1, {10: 0.5, 20: 1.0})],
            "hard": [run("2", 0, {10: 0.77, 20: 0.9}), run("3", 1, {10: 0.77, 20: 0.9})]}
    tags = pd.DataFrame({"job": ["0", "1", "2", "3"], "config_label": ["f", "f", "h", "h"],
                         "model.template_mode": ["free", "free", "hard", "hard"]})
    rows = convergence_runs(runs, tags).set_index("job")
    assert rows.loc["2", "target"] == pytest.approx(0.76) and rows.loc["2", "steps_to_target"] == 10  # 0.95 * 0.8
    assert rows.loc["3", "target"] == pytest.approx(0.95) and math.isnan(rows.loc["3", "steps_to_target"])
    assert not rows.loc["3", "reached"] and rows.loc["3", "reference_job"] == "1"
    assert rows.loc["1", "steps_to_target"] == 20            # the free run against its own best
    assert convergence_runs(runs, tags.drop(columns=["model.template_mode"])).empty  # no template sweep


MULTIRUN = """\
hydra:
  sweeper:
    _target_: hydra._internal.core_plugins.basic_sweeper.BasicSweeper
    params: null
  overrides:
    task:
    - model.template_mode=free,hard
    - seed=0,1,2
"""
FREE = {0: {50: 0.6, 100: 0.8, 150: 0.9}, 1: {50: 0.6, 100: 0.85, 150: 0.8}, 2: {50: 0.7, 100: 0.7, 150: 0.84}}
HARD = {0: {50: 0.9, 100: 1.0, 150: 1.0}, 1: {50: 0.7, 100: 0.81, 150: 0.9}, 2: {50: 0.6, 100: 0.7, 150: 0.8}}


def test_headlab_aggregate_writes_steps_to_target_per_config(tmp_path):
    sweep = tmp_path / "multirun"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text(MULTIRUN)
    for job, (mode, seed) in enumerate((m, s) for m in ("free", "hard") for s in (0, 1, 2)):
        d = sweep / str(job)
        (d / ".hydra").mkdir(parents=True)
        (d / ".hydra" / "overrides.yaml").write_text(f"- model.template_mode={mode}\n- seed={seed}\n")
        acc = (FREE if mode == "free" else HARD)[seed]
        roles = [["previous_token", "sink"], ["broad", "sink"]] if mode == "hard" else [["mixed"] * 2] * 2
        (d / "summary.json").write_text(json.dumps({"status": "completed", "swept": {"seed": seed},
                                                     "val_acc": max(acc.values()), "final_roles": roles}))
        pd.DataFrame({"step": list(acc), "val/acc": list(acc.values())}).to_csv(d / "metrics.csv", index=False)
    result = aggregate_sweep(SweepDir(sweep), tmp_path / "out", figures=False)
    assert CONVERGENCE_CSV in {p.name for p in result.written}
    table = pd.read_csv(tmp_path / "out" / CONVERGENCE_CSV).set_index("model.template_mode")
    # targets 0.855, 0.8075, 0.798: free reaches them at 150, 100, 150; hard at 50, 100, 150
    hard = [50.0, 100.0, 150.0]
    half = stats.t.ppf(0.975, 2) * np.std(hard, ddof=1) / math.sqrt(3)
    assert table.loc["hard", "steps_to_target_mean"] == pytest.approx(100.0)
    assert table.loc["hard", "steps_to_target_ci95_low"] == pytest.approx(max(0.0, 100.0 - half))
    assert table.loc["hard", "steps_to_target_ci95_high"] == pytest.approx(100.0 + half)
    assert table.loc["free", "steps_to_target_mean"] == pytest.approx(np.mean([150, 100, 150]))
    assert table.loc["hard", "best_val_acc_mean"] == pytest.approx(np.mean([1.0, 0.9, 0.8]))
    assert (table.loc["hard", "n_reached"], table.loc["free", "n_reached"]) == (3, 3)
    assert table.loc["hard", "final_role_sink_mean"] == 2.0 and table.loc["free", "final_role_mixed_mean"] == 4.0
    text = format_convergence(pd.read_csv(tmp_path / "out" / CONVERGENCE_CSV))
    assert "3/3" in text and "100 [" in text                 # hard: 3 of 3 seeds, 100 steps on average
