"""intervention_effects.csv: hand-made curves and role tables with known dips, recoveries and
role changes, paired with the control of the same seed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from headlab.store import HEAD_METRICS, SweepDir, append_part, head_metric_rows
from headlab.sweep import aggregate_sweep
from headlab.sweep.interventions import (
    EFFECTS_CSV,
    EFFECT_RUNS_CSV,
    acc_effects,
    effects_runs,
    format_effects,
    intervention_info,
    role_changes,
)
from headlab.sweep.runs import Run


def curve(pairs: dict[int, float]) -> pd.DataFrame:
    return pd.DataFrame({"step": list(pairs), "val_acc": list(pairs.values())})


def roles_frame(by_step: dict[int, list[list[float]]]) -> pd.DataFrame:
    return pd.DataFrame([{"step": s, "layer": layer, "head": head, "metric": "role", "value": float(v)}
                         for s, layers in by_step.items() for layer, heads in enumerate(layers)
                         for head, v in enumerate(heads)])


# ---------------------------------------------------------------- accuracy numbers
def test_acc_effects_reads_before_dip_best_and_recovery_against_the_control():
    # metrics.csv step s = the model after s + 1 updates: 19 is the last intact one for t = 20
    run = curve({9: 0.6, 19: 0.8, 29: 0.5, 39: 0.7, 49: 0.75})
    control = curve({9: 0.6, 19: 0.8, 29: 0.85, 39: 0.9, 49: 0.88})
    out = acc_effects(run, control, t=20)
    assert out["acc_before"] == 0.8
    assert (out["step_after"], out["acc_after"]) == (29, 0.5)
    assert out["dip"] == pytest.approx(0.3)
    assert out["control_acc_after"] == 0.85 and out["dip_vs_control"] == pytest.approx(0.35)
    assert out["best_after"] == 0.75 and out["control_best_after"] == 0.9
    assert out["recovered_frac"] == pytest.approx(0.75 / 0.9)
    assert out["final_gap"] == pytest.approx(0.88 - 0.75)


def test_acc_effects_without_a_control_leaves_the_comparisons_nan():
    out = acc_effects(curve({10: 0.6, 20: 0.7}), None, t=15)
    assert acc_effects(curve({10: 0.6, 20: 0.7}), None, t=20)["acc_after"] == 0.7  # logged at t: after t + 1 updates
    assert out["acc_before"] == 0.6 and out["acc_after"] == 0.7 and out["best_after"] == 0.7
    assert all(math.isnan(out[k]) for k in ("control_acc_after", "dip_vs_control", "recovered_frac", "final_gap"))


# ---------------------------------------------------------------- role changes
def test_role_changes_count_survivors_only_inside_the_window():
    frame = roles_frame({
        0: [[0, 1], [2, 3]],
        50: [[0, 1], [2, 3]],    # t0 = 50 for t = 60
        100: [[4, 1], [2, 3]],   # L0H0 changes
        150: [[0, 1], [2, 5]],   # L0H0 changes back, L1H1 changes
        250: [[5, 5], [5, 5]],   # outside t + window = 60 + 100
    })
    changes, heads_changed = role_changes(frame, t=60, window=100, excluded=set())
    assert changes == 3 and heads_changed == 1             # L0H0 ends where it began; L1H1 does not
    changes, heads_changed = role_changes(frame, t=60, window=100, excluded={(1, 1)})
    assert changes == 2 and heads_changed == 0              # the knocked-out head is not a survivor
    assert role_changes(frame, t=60, window=200, excluded=set()) == (3.0 + 3.0, 4.0)  # all 4 heads -> 5 at 250


def test_role_changes_ignore_unmeasured_roles_and_need_two_steps():
    frame = roles_frame({0: [[0, math.nan]], 10: [[1, 2]]})
    assert role_changes(frame, t=0, window=10, excluded=set()) == (1.0, 1.0)
    assert all(math.isnan(v) for v in role_changes(frame, t=10, window=100, excluded=set()))
    assert all(math.isnan(v) for v in role_changes(None, t=0, window=10, excluded=set()))


# ---------------------------------------------------------------- pairing with the same seed's control
def make_run(job: str, seed: int, step: int | None, curve_pairs: dict[int, float], roles=None) -> Run:
    summary = {"status": "completed", "swept": {"seed": seed},
               "intervention": {"kind": "knockout", "step": step, "heads": [[0, 1]],
                                "applied_step": step}}
    return Run(job, Path(job), "completed", overrides=[f"intervention.knockout.step={step}", f"seed={seed}"],
               summary=summary, val_curve=curve(curve_pairs), head_metrics=roles)


def test_each_run_is_compared_with_the_control_of_its_own_seed():
    controls = [make_run("0", 0, None, {9: 0.5, 19: 0.8, 29: 0.8}), make_run("1", 1, None, {9: 0.5, 19: 0.6, 29: 0.6})]
    knocked = [make_run("2", 0, 10, {9: 0.5, 19: 0.4, 29: 0.4}), make_run("3", 1, 10, {9: 0.5, 19: 0.3, 29: 0.6})]
    by_config = {"step=null": controls, "step=10": knocked}
    tags = pd.DataFrame({"job": ["0", "1", "2", "3"], "config_label": ["null", "null", "10", "10"],
                         "intervention.knockout.step": ["null", "null", "10", "10"]})
    rows = effects_runs(by_config, tags).set_index("job")
    assert list(rows.index) == ["2", "3"]                  # controls get no row
    assert rows.loc["2", "control_job"] == "0" and rows.loc["3", "control_job"] == "1"
    assert rows.loc["2", "recovered_frac"] == pytest.approx(0.4 / 0.8)
    assert rows.loc["3", "recovered_frac"] == pytest.approx(1.0)
    assert rows.loc["2", "dip_vs_control"] == pytest.approx(0.4) and rows.loc["3", "dip_vs_control"] == pytest.approx(0.3)
    assert rows.loc["2", "heads"] == "L0H1"


def test_a_sweep_without_interventions_has_no_table(tmp_path):
    plain = Run("0", tmp_path, "completed", summary={"status": "completed"}, val_curve=curve({10: 0.5}))
    assert effects_runs({"c": [plain]}, pd.DataFrame({"job": ["0"], "config_label": ["c"]})).empty


# ---------------------------------------------------------------- through headlab-aggregate
MULTIRUN = """\
hydra:
  sweeper:
    _target_: hydra._internal.core_plugins.basic_sweeper.BasicSweeper
    params: null
  overrides:
    task:
    - intervention=knockout
    - intervention.knockout.step=null,20
    - seed=0,1,2
"""
# control and knocked-out val acc per seed; the knockout at 20 lowers step 29 and recovers by 39
# (metrics.csv steps: step s logs the model after s + 1 updates)
CONTROL = {0: {9: 0.6, 19: 0.7, 29: 0.8, 39: 0.9}, 1: {9: 0.6, 19: 0.7, 29: 0.8, 39: 0.8},
           2: {9: 0.6, 19: 0.7, 29: 0.7, 39: 0.9}}
KNOCKED = {0: {9: 0.6, 19: 0.7, 29: 0.5, 39: 0.9}, 1: {9: 0.6, 19: 0.7, 29: 0.6, 39: 0.6},
           2: {9: 0.6, 19: 0.7, 29: 0.6, 39: 0.81}}


def write_job(sweep: Path, job: int, seed: int, step: int | None) -> None:
    d = sweep / str(job)
    (d / ".hydra").mkdir(parents=True)
    overrides = ["intervention=knockout", f"intervention.knockout.step={'null' if step is None else step}", f"seed={seed}"]
    (d / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    acc = (KNOCKED if step is not None else CONTROL)[seed]
    summary = {"status": "completed", "run_id": str(job), "swept": {"seed": seed}, "val_acc": max(acc.values()),
               "intervention": {"kind": "knockout", "step": step, "heads": [[0, 0]], "applied_step": step}}
    (d / "summary.json").write_text(json.dumps(summary))
    pd.DataFrame({"step": list(acc), "val/acc": list(acc.values())}).to_csv(d / "metrics.csv", index=False)
    for s in (0, 20, 30, 40):
        # survivors (L0H1, L1H0, L1H1): in knocked runs L0H1 changes role at 30 (seed + 1 more at 40
        # for L1H0); in controls nothing changes. The knocked head L0H0 changes in every run.
        moved = step is not None and s >= 30
        layer0 = [float(s // 10), 4.0 if moved else 1.0]
        layer1 = [3.0 if (step is not None and s >= 40 and seed > 0) else 2.0, 2.0]
        per_layer = [{"role": np.array(layer0)}, {"role": np.array(layer1)}]
        append_part(d / HEAD_METRICS, s, head_metric_rows(str(job), s, 0, per_layer))


@pytest.fixture(scope="module")
def aggregated(tmp_path_factory):
    sweep = tmp_path_factory.mktemp("knockout") / "multirun"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text(MULTIRUN)
    for job, (step, seed) in enumerate((s, seed) for s in (None, 20) for seed in (0, 1, 2)):
        write_job(sweep, job, seed, step)
    out = sweep / "aggregate"
    result = aggregate_sweep(SweepDir(sweep), out, figures=False)
    return result, out


def t_interval(values):
    values = np.asarray(values, dtype=float)
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values))
    return values.mean(), values.mean() - half, values.mean() + half


def test_aggregate_writes_one_effect_row_per_intervened_config_with_t_intervals(aggregated):
    result, out = aggregated
    assert {EFFECTS_CSV, EFFECT_RUNS_CSV} <= {p.name for p in result.written}
    table = pd.read_csv(out / EFFECTS_CSV)
    assert len(table) == 1                                   # the control config is the reference, not a row
    row = table.iloc[0]
    assert (row["kind"], int(row["step"]), row["heads"], int(row["n_seeds"]), int(row["n_with_control"])) == \
        ("knockout", 20, "L0H0", 3, 3)
    mean, low, high = t_interval([0.8 - 0.5, 0.8 - 0.6, 0.7 - 0.6])
    assert row["dip_vs_control_mean"] == pytest.approx(mean)
    assert (row["dip_vs_control_ci95_low"], row["dip_vs_control_ci95_high"]) == (pytest.approx(low), pytest.approx(high))
    assert row["recovered_frac_mean"] == pytest.approx(np.mean([0.9 / 0.9, 0.6 / 0.8, 0.81 / 0.9]))
    assert row["acc_before_mean"] == pytest.approx(0.7)
    # survivors: L0H1 changes once in every knocked run, L1H0 once more in seeds 1 and 2; controls: none
    assert row["role_changes_mean"] == pytest.approx(np.mean([1, 2, 2]))
    assert row["heads_role_changed_mean"] == pytest.approx(np.mean([1, 2, 2]))
    assert row["control_role_changes_mean"] == 0.0
    per_run = pd.read_csv(out / EFFECT_RUNS_CSV)
    assert sorted(zip(per_run["seed"], per_run["control_job"])) == [(0, 0), (1, 1), (2, 2)]


def test_the_effects_print_shows_each_config_with_its_interval(aggregated):
    _, out = aggregated
    text = format_effects(pd.read_csv(out / EFFECTS_CSV))
    assert "knockout" in text and "L0H0" in text and "[" in text


def test_the_step_written_at_t_wins_over_a_summary_that_lost_it(tmp_path):
    (tmp_path / "interventions.json").write_text(json.dumps(
        [{"kind": "knockout", "step": 20, "heads": [[1, 3]], "applied_step": 20}]))
    summary = {"status": "completed", "intervention": {"kind": "knockout", "step": 20, "heads": [[1, 3]],
                                                       "applied_step": None}}
    lost = Run("9", tmp_path, "completed", summary=summary)
    assert intervention_info(lost)["applied_step"] == 20 and intervention_info(lost)["heads"] == [[1, 3]]
    summary["intervention"]["step"] = None                   # a control: nothing to look up
    assert intervention_info(Run("0", tmp_path, "completed", summary=summary))["applied_step"] is None
