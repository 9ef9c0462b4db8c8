"""induction_onsets.csv: per config, the earliest head onset over seeds with a t-interval."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from headlab.sweep.induction import induction_table, run_onsets
from headlab.sweep.runs import Run


def _run(job: str, onsets: dict, loss_drop, max_score: float, coincide) -> Run:
    lm = {"induction_onset_steps": onsets, "loss_drop_step": loss_drop, "icl_jump_step": loss_drop,
          "max_induction_score_overall": max_score, "onsets_coincide_with_loss_drop": coincide}
    return Run(job=job, run_dir=Path(job), status="completed", summary={"lm": lm})


def test_onset_is_the_earliest_head_and_ci_is_students_t():
    runs = [_run("0", {"L1H0": 1400, "L1H1": 1300, "L0H0": None}, 1350, 0.9, True),
            _run("1", {"L1H0": 1500, "L1H1": None}, 1500, 0.8, True),
            _run("2", {"L1H0": 1700}, 1650, 0.7, False)]
    assert run_onsets(runs[0])["onset_step"] == 1300
    table = induction_table({"n_layers=2": runs}, pd.DataFrame())
    row = table.iloc[0]
    values = [1300, 1500, 1700]
    half = stats.t.ppf(0.975, 2) * stats.sem(values)
    assert row["onset_step_mean"] == pytest.approx(1500)
    assert row["onset_step_ci95_low"] == pytest.approx(1500 - half)
    assert row["n_seeds"] == 3 and row["n_formed"] == 3 and row["n_coincide"] == 2


def test_control_without_onsets_has_nan_onset_and_none_formed():
    runs = [_run(str(i), {"L0H0": None}, None, 0.05, None) for i in range(2)]
    row = induction_table({"n_layers=1": runs}, pd.DataFrame()).iloc[0]
    assert row["n_formed"] == 0 and pd.isna(row["onset_step_mean"])


def test_classifier_runs_give_no_table():
    run = Run(job="0", run_dir=Path("0"), status="completed", summary={"val_acc": 0.9})
    assert run_onsets(run) is None and induction_table({"x": [run]}, pd.DataFrame()).empty


def test_new_seed_prediction_interval_and_the_shuffled_drop_test_sit_beside_the_mean():
    runs = [_run("0", {"L1H0": 1300}, 1300, 0.9, True), _run("1", {"L1H0": 1500}, 1500, 0.8, True),
            _run("2", {"L1H0": 1700}, 1700, 0.7, True)]
    runs[0].summary["lm"]["induction_midpoint_steps"] = {"L1H0": 1450}
    row = induction_table({"n_layers=2": runs}, pd.DataFrame()).iloc[0]
    half = stats.t.ppf(0.975, 2) * stats.tstd([1300, 1500, 1700]) * (1 + 1 / 3) ** 0.5  # by hand
    assert (row["onset_step_pi95_low"], row["onset_step_pi95_high"]) == pytest.approx((1500 - half, 1500 + half))
    assert row["onset_step_pi95_high"] - row["onset_step_pi95_low"] > row["onset_step_ci95_high"] - row["onset_step_ci95_low"]
    # each seed on its own drop: the identity is 1 of the 3! orders with gap 0
    assert row["onset_loss_drop_gap"] == 0 and row["onset_loss_drop_p"] == pytest.approx(1 / 6)
    assert row["midpoint_step_mean"] == 1450 and pd.isna(row["midpoint_step_ci95_low"])  # one seed has a midpoint
