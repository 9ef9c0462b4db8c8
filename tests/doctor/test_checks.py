"""Each doctor check on hand-made run tables: silent on a healthy run, triggered by the one thing it looks for."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from headlab.doctor import FAIL, NOT_MEASURED, OK, WARN, Thresholds, run_checks
from headlab.doctor.checks import (
    check_head_width,
    check_init_variance,
    check_late_instability,
    check_redundancy,
    check_run_status,
    check_stuck_heads,
    check_warmup,
)
from tests.doctor._runs import STEPS, entropy_table, healthy_roles, healthy_tables, js_table, roles_table

T = Thresholds()


def _with_roles(tables, roles_by_step):
    others = tables.head_metrics[tables.head_metrics["metric"] != "role"]
    tables.head_metrics = pd.concat([others, roles_table(roles_by_step)], ignore_index=True)
    return tables


def test_a_healthy_run_triggers_no_check():
    findings = run_checks(healthy_tables())
    assert [f.check for f in findings] == ["run_status", "init_variance", "warmup", "head_width", "redundant_heads",
                                           "late_instability", "never_left_init_role"]
    assert {f.check: f.status for f in findings} == {f.check: OK for f in findings}
    assert all(f.override == "" for f in findings)


@pytest.mark.parametrize("status", ["diverged", "failed"])
def test_a_diverged_or_failed_run_fails_and_the_table_checks_are_not_measured(status):
    findings = run_checks(healthy_tables(status=status, diverged_step=123, error="loss is nan"))
    assert findings[0].status == FAIL
    assert all(f.status == NOT_MEASURED and f.message == "the run did not complete" for f in findings[1:])
    if status == "diverged":
        assert "step 123" in findings[0].message and "optim.lr=0.000333" in findings[0].override


def test_a_completed_run_with_a_nan_loss_fails():
    finding = check_run_status(healthy_tables(val_loss=math.nan), T)
    assert finding.status == FAIL and "non-finite" in finding.message


def test_heads_alike_at_init_warn_then_fail_with_the_js_they_had():
    tables = healthy_tables()
    tables.head_pairs = js_table({s: (0.005 if s == 0 else 0.4) for s in STEPS})
    warn = check_init_variance(tables, T)
    assert warn.status == WARN and warn.evidence["init_js_mean"] == pytest.approx(0.005)
    assert warn.override == "model.init_scale=2 optim.warmup_ratio=0.1"
    tables.head_pairs = js_table({s: (0.0005 if s == 0 else 0.4) for s in STEPS})
    tables.head_metrics = pd.concat([roles_table(healthy_roles()), entropy_table(at_init=0.999)])
    fail = check_init_variance(tables, T)
    assert fail.status == FAIL and fail.evidence["init_entropy_norm_min"] == pytest.approx(0.999)


def test_init_variance_is_not_measured_without_a_step0_measurement():
    tables = healthy_tables()
    tables.head_pairs = tables.head_pairs[tables.head_pairs["step"] > 0]
    tables.head_metrics = tables.head_metrics[tables.head_metrics["step"] > 0]
    finding = check_init_variance(tables, T)
    assert finding.status == NOT_MEASURED and "step 50" in finding.message


def test_a_high_lr_without_warmup_warns_and_a_small_lr_does_not():
    tables = healthy_tables()
    tables.summary["swept"].update({"optim.lr": 3e-3, "optim.warmup_ratio": 0.0})
    finding = check_warmup(tables, T)
    assert finding.status == WARN and finding.evidence["warmup_steps"] == 0
    assert "optim.warmup_ratio=0.05" in finding.override
    tables.summary["swept"]["optim.lr"] = 5e-4
    assert check_warmup(tables, T).status == OK
    tables.summary["swept"]["optim.lr"] = 3e-3
    tables.summary["swept"]["optim.warmup_steps"] = 30  # 5 % of 600 steps: enough
    assert check_warmup(tables, T).status == OK


def test_warmup_is_not_measured_for_sgd():
    tables = healthy_tables()
    tables.config = {"optim": {"optimizer": {"_target_": "torch.optim.SGD"}}}
    finding = check_warmup(tables, T)
    assert finding.status == NOT_MEASURED and "SGD" in finding.message


def test_heads_narrower_than_32_warn_with_a_same_budget_head_count():
    finding = check_head_width(healthy_tables(head_dim=16), T)
    assert finding.status == WARN and finding.evidence["head_dim"] == 16
    assert finding.override.startswith("model.n_heads=4 (same budget)")  # d_model 128 / 32


def test_three_identical_heads_are_two_redundant_ones():
    tables = healthy_tables()
    same = [[0, 0, 0, .4], [0, 0, 0, .4], [0, 0, 0, .4], [.4, .4, .4, 0]]
    tables.head_pairs = js_table(last_matrix=same)
    finding = check_redundancy(tables, T)
    assert finding.status == WARN and finding.evidence["redundant_heads"] == 2
    assert finding.evidence["clusters"] == {0: [[0, 1, 2]]} and finding.evidence["redundant_fraction"] == 0.5
    assert finding.override.startswith("model.n_heads=2")


def test_the_importance_reports_redundancy_count_wins_over_the_pair_table():
    tables = healthy_tables()
    tables.importance = {"redundant_heads": 1}
    finding = check_redundancy(tables, T)
    assert finding.status == OK and finding.evidence["source"] == "importance.json"
    assert finding.evidence["redundant_fraction"] == 0.25  # a quarter: at the threshold, not above
    tables.importance = {"redundant_heads": 2}
    assert check_redundancy(tables, T).status == WARN
    tables.summary["redundant_heads"] = 0  # the run's own summary comes first
    assert check_redundancy(tables, T).evidence == {"source": "summary.json", "redundant_heads": 0, "n_heads": 4,
                                                    "redundant_fraction": 0.0}


def test_roles_that_change_at_the_last_measurements_are_late_instability():
    roles = healthy_roles()
    roles[500] = ["local", "previous_token", "long_range", "vertical"]  # heads 0 and 1 swap late ...
    roles[600] = ["local", "previous_token", "broad", "vertical"]        # ... and head 2 changes at the end
    finding = check_late_instability(_with_roles(healthy_tables(), roles), T)
    assert finding.status == WARN
    assert finding.evidence["changing_late"] == ["L0H0", "L0H1", "L0H2"]
    assert finding.evidence["late_after_step"] == pytest.approx(480.0)


def test_heads_still_mixed_at_the_end_never_left_their_init_role():
    roles = healthy_roles()
    for s in STEPS:
        roles[s][1] = roles[s][3] = "mixed"
    finding = check_stuck_heads(_with_roles(healthy_tables(), roles), T)
    assert finding.status == WARN and finding.evidence["stuck"] == ["L0H1 (mixed)", "L0H3 (mixed)"]
    assert finding.evidence["stuck_fraction"] == 0.5


def test_heads_that_read_the_decision_left_their_init_role_though_every_query_stays_mixed():
    """A classifier's heads read from [CLS] (`role@task`): mixed over all queries, vertical from [CLS]. The
    doctor judges them as headlab-report does, by the task role; without it, by the all-query role."""
    mixed = {s: ["mixed"] * 4 for s in STEPS}
    tables = _with_roles(healthy_tables(), mixed)
    assert check_stuck_heads(tables, T).status == WARN  # no task role measured: all four stuck, as before
    task = roles_table(healthy_roles()).assign(metric="role@task")
    tables.head_metrics = pd.concat([tables.head_metrics, task], ignore_index=True)
    finding = check_stuck_heads(tables, T)
    assert finding.status == OK and finding.evidence["role"] == "task role" and finding.evidence["stuck"] == []
    assert finding.message == "0 of 4 heads end in their init task role"
    assert check_late_instability(tables, T).status == OK  # settled by step 100 of 600 from [CLS]


def test_a_run_without_head_tables_gets_not_measured_with_reasons():
    tables = healthy_tables()
    tables.head_metrics = tables.head_pairs = None
    by_check = {f.check: f for f in run_checks(tables)}
    for name in ("init_variance", "redundant_heads", "late_instability", "never_left_init_role"):
        assert by_check[name].status == NOT_MEASURED and by_check[name].message
    assert by_check["run_status"].status == OK and by_check["head_width"].status == OK


def test_a_pretrained_model_measured_once_has_no_init_and_reads_its_head_width_from_the_summary():
    """headlab-analyze-hf's summary: kind analyze_hf, model {d_head, n_heads}, no loss, one measurement."""
    tables = healthy_tables(kind="analyze_hf", model={"d_head": 16, "n_heads": 12}, head_dim=None, val_loss=None)
    tables.summary["swept"] = {}
    tables.head_metrics = tables.head_metrics[tables.head_metrics["step"] == 0]
    by_check = {f.check: f for f in run_checks(tables)}
    assert by_check["run_status"].message == "completed"
    assert by_check["init_variance"].status == NOT_MEASURED and "pretrained" in by_check["init_variance"].message
    assert by_check["head_width"].status == WARN and by_check["head_width"].evidence["n_heads"] == 12
    assert by_check["warmup"].status == NOT_MEASURED


def test_the_pair_table_fallback_uses_the_bar_of_the_sweep_table_and_headlab_importance():
    """Two heads 0.06 nats apart sit under the 10 %-mass bar (0.0693): one duplicate, the count
    `pair_table_redundancy` (sweep_redundancy.csv, importance.json) gives on the same table."""
    from headlab.analysis.redundancy import pair_table_redundancy

    tables = healthy_tables()
    close = [[0, .06, .4, .4], [.06, 0, .4, .4], [.4, .4, 0, .4], [.4, .4, .4, 0]]
    tables.head_pairs = js_table(last_matrix=close)
    finding = check_redundancy(tables, T)
    assert finding.evidence["redundant_heads"] == 1 == pair_table_redundancy(tables.head_pairs, T.redundancy_mass)["redundant_heads"]
    assert finding.evidence["clusters"] == {0: [[0, 1]]}
