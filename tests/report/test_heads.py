"""The head report: hand-built tables give hand-written lines; a trained planted task's report names its head."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from headlab.analysis import ROLES
from headlab.errors import DataError
from headlab.interventions import measure_importance
from headlab.interventions.importance import importance_rows
from headlab.report import head_report, key_tokens, report_lines, run_report, sweep_report
from headlab.store import RunDir, SweepDir, append_part, head_metric_rows
from tests._planted import train_planted

NAN = math.nan
R = {name: float(i) for i, name in enumerate(ROLES)}
STEPS = (0, 10, 20, 30)
# Per step: role@task per head (H0 becomes vertical at 10, H1 content throughout, H2 turns broad at the last step).
TASK_ROLES = {0: ("mixed", "content", "mixed"), 10: ("vertical", "content", "mixed"),
              20: ("vertical", "content", "mixed"), 30: ("vertical", "content", "broad")}
LAST = {  # the last measurement's task-view metrics, per head
    "last_attention@task": [0.48, 0.05, 0.04], "cls_attention@task": [0.10, 0.05, 0.04],
    "punct_attention@task": [0.0, 0.0, 0.0], "prev_score@task": [NAN, NAN, NAN], "next_score@task": [0.05, 0.10, 0.04],
    "self_score@task": [0.10, 0.05, 0.04], "entropy_norm@task": [0.50, 0.30, 0.95], "confidence@task": [0.50, 0.80, 0.10],
    "prev_score@y": [0.10, 0.60, 0.05], "confidence@y": [0.20, 0.60, 0.10], "entropy_norm@y": [0.60, 0.40, 0.70],
    "role@y": [R["mixed"], R["previous_token"], R["mixed"]], "role": [R["mixed"], R["mixed"], R["broad"]],
}


def _head_metrics(extra: dict[str, list[float]] | None = None) -> pd.DataFrame:
    frames = []
    for step in STEPS:
        layer = {"role@task": np.array([R[r] for r in TASK_ROLES[step]]), "role": np.array(LAST["role"])}
        if step == STEPS[-1]:
            layer.update({k: np.array(v) for k, v in {**LAST, **(extra or {})}.items()})
        frames.append(head_metric_rows("r", step, 0, [layer]))
    return pd.concat(frames, ignore_index=True)


def _ablation(values, step=30) -> pd.DataFrame:
    return head_metric_rows("r", step, 0, [{"ablation_dloss": np.array(values)}])


def test_hand_built_tables_give_hand_written_lines():
    lines = report_lines(_head_metrics(), _ablation([0.21, 0.5, 0.01]), {"task_queries": "[CLS]"})
    y0 = "from 'y' has no single target (top key 0.20), role mixed"
    assert lines == [
        "L0H1: from [CLS] picks tokens by content, wherever they are (top key 0.80), role content (all queries: mixed); "
        "from 'y' attends the previous token (0.60), role previous_token; "
        "1st most important of 3 (ablation dloss, step 30: 0.5); role settled at step 0",
        f"L0H0: from [CLS] attends the last token (0.48), role vertical (all queries: mixed); {y0}; "
        "2nd most important of 3 (ablation dloss, step 30: 0.21); role settled at step 10",
        "L0H2: from [CLS] spreads over the whole sentence (entropy 0.95 of uniform), role broad (all queries: broad); "
        "from 'y' has no single target (top key 0.10), role mixed; "
        "3rd most important of 3 (ablation dloss, step 30: 0.01); role still changing at step 30 (the last measurement)",
    ]


def test_importance_falls_back_to_the_gradient_and_else_to_layer_order():
    by_gradient = head_report(_head_metrics({"grad_importance": [0.3, 0.1, 0.7]}))
    assert [(h.layer, h.head, h.rank) for h in by_gradient] == [(0, 2, 1), (0, 0, 2), (0, 1, 3)]
    assert "1st most important of 3 (gradient importance, step 30: 0.7)" in by_gradient[0].text
    unranked = head_report(_head_metrics())
    assert [h.head for h in unranked] == [0, 1, 2] and all(h.rank is None and "important" not in h.text for h in unranked)
    # without summary.json the queries are named by what they are for
    assert unranked[0].text.startswith("L0H0: from the decision's queries attends the last token (0.48)")


def test_a_run_without_the_task_view_reads_every_query():
    rows = head_metric_rows("r", 5, 0, [{"role": np.array([R["sink"]]), "cls_attention": np.array([0.7]),
                                         "last_attention": np.array([0.1]), "confidence": np.array([0.7])}])
    assert report_lines(rows) == ["L0H0: from every token attends [CLS] (0.70), role sink; role measured once (step 5)"]


def test_run_and_sweep_folders(tmp_path):
    run = RunDir(tmp_path / "sweep" / "0")
    for step, part in _head_metrics().groupby("step"):
        append_part(run.head_metrics_path, int(step), part)
    _ablation([0.21, 0.5, 0.01]).to_parquet(run.head_importance_path)
    run.summary_path.write_text(json.dumps({"val_acc": 0.9612, "task_queries": "[CLS]", "overrides": "model.n_heads=3,seed=1"}))
    lines = run_report(run)
    assert lines[0] == f"{run.path}: 3 heads, last measured at step 30, val_acc 0.961 (best checkpoint), model.n_heads=3,seed=1"
    assert lines[1].startswith("  L0H1: from [CLS] picks tokens by content") and len(lines) == 4
    (tmp_path / "sweep" / "1").mkdir()
    (tmp_path / "sweep" / "multirun.yaml").write_text("{}")
    swept = sweep_report(SweepDir(tmp_path / "sweep"))
    assert swept[:4] == lines and swept[4].startswith(f"{tmp_path / 'sweep' / '1'}: skipped (no head_metrics.parquet")
    with pytest.raises(DataError, match="no head_metrics.parquet: not a headlab run directory"):
        run_report(RunDir(tmp_path))


@pytest.fixture(scope="module", params=["last", "anywhere"])
def planted_report(request):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        planted = train_planted(request.param)
        importance = measure_importance(planted.net, list(planted.probe.batches(64)), curves=False)
    finally:
        torch.set_num_threads(threads)
    step = planted.measurements[-1].step
    head_metrics = pd.concat([head_metric_rows("r", m.step, m.epoch, m.head_metrics) for m in planted.measurements])
    # 32 sentences (a run stores 8: probe_patterns): fewer leave a filler word level with a label word by chance
    return request.param, report_lines(head_metrics, importance_rows("r", step, 0, importance), {"task_queries": "[CLS]"},
                                       _sentences(planted, step, 32))


LABEL_WORDS = {2: "cat", 3: "dog", 4: "fox"}  # the planted label tokens (tests/_planted.py), named as words


def _sentences(planted, step, n=8):
    """A probe_patterns/ part of the first `n` probe sentences, as the training callback stores it."""
    from headlab.model.hooks import capture_patterns

    batch = next(planted.probe.batches(n))
    with torch.no_grad():
        patterns = torch.stack(capture_patterns(planted.net, batch["input_ids"], batch["attention_mask"])).transpose(1, 2)
    names = [["[CLS]" if t == 1 else LABEL_WORDS.get(t, f"w{t}") for t in row] for row in batch["input_ids"].tolist()]
    return {"patterns": patterns.numpy(), "lengths": batch["attention_mask"].sum(1).numpy(), "tokens": np.array(names),
            "step": step}


def test_the_report_names_the_planted_head_in_words(planted_report):
    """The head whose ablation costs most is named first, with what it reads from [CLS]."""
    where, lines = planted_report
    top = lines[0]
    assert "1st most important of 2" in top and "role settled at step" in top
    if where == "last":
        assert "from [CLS] attends the last token" in top and "role vertical (all queries: mixed)" in top
        assert "mostly" not in top  # a head that reads a place gets no token clause
    else:
        assert "from [CLS] picks tokens by content, wherever they are" in top and "role content" in top
        # ... and names what it picks: the label words, wherever they are
        picked = top.split("mostly ", 1)[1].split(" in 32 probe sentences", 1)[0]
        first_two = [word.split(" (", 1)[0].strip("'") for word in picked.split(", ")[:2]]
        assert set(first_two) <= set(LABEL_WORDS.values()), top
    assert "from [CLS] attends the last token" not in lines[1]  # the other head does not


def test_key_tokens_sum_each_heads_attention_from_the_decision_queries_by_token():
    a = np.zeros((1, 2, 2, 4, 4))
    a[0, 0, 0, 0] = [0.1, 0.0, 0.9, 0.0]  # head 0 from [CLS]: 'cat' in sentence 0 ...
    a[0, 0, 1, 0] = [0.1, 0.3, 0.6, 0.0]  # ... and 'dog' (0.6) in sentence 1
    a[0, 1, :, :, 0] = 1.0  # head 1: every query on [CLS]
    a[0, 0, 0, 3] = [0.0, 0.0, 0.0, 1.0]  # a row that is not [CLS]'s: read only with every token
    part = {"patterns": a, "lengths": np.array([4, 3]),
            "tokens": np.array([["[CLS]", "the", "cat", "so"], ["[CLS]", "a", "dog", ""]]), "step": 30}
    by_cls = key_tokens(part, "[CLS]")
    assert by_cls[(0, 0)] == [("cat", 0.45), ("dog", 0.3), ("a", 0.15)]  # (0.9, 0.6, 0.3) of 2.0
    assert by_cls[(0, 1)] == [("[CLS]", 1.0)]
    every = key_tokens(part, "every token")  # 4 + 3 rows; sentence 0's last row on 'so'
    assert every[(0, 0)][:2] == [("so", pytest.approx(1 / 3)), ("cat", pytest.approx(0.9 / 3))]
    assert key_tokens(part, "the last token")[(0, 0)] == [("so", 1.0)]  # sentence 1's last row (position 2) is all zero


def test_only_a_head_that_picks_by_content_names_its_tokens():
    part = {"patterns": np.zeros((1, 3, 1, 2, 2)), "lengths": np.array([2]), "tokens": np.array([["[CLS]", "cat"]]),
            "step": 30}
    part["patterns"][0, :, 0, 0] = [0.2, 0.8]
    lines = report_lines(_head_metrics(), None, {"task_queries": "[CLS]"}, part)
    assert "picks tokens by content, wherever they are (top key 0.80), mostly 'cat' (0.80), '[CLS]' (0.20) in 1 probe " \
           "sentences, role content" in lines[1]
    assert "mostly" not in lines[0] and "mostly" not in lines[2]  # the last-token and the broad head
    part["step"] = 20
    assert "in 1 probe sentences at step 20, role content" in report_lines(_head_metrics(), None, {"task_queries": "[CLS]"}, part)[1]


def test_a_head_that_stays_mixed_formed_no_role():
    rows = pd.concat([head_metric_rows("r", step, 0, [{"role": np.array([R[a], R[b]]), "confidence": np.array([0.2, 0.9])}])
                      for step, (a, b) in ((0, ("mixed", "mixed")), (8, ("mixed", "content")), (16, ("mixed", "content")))])
    assert [line.split("; ")[-1] for line in report_lines(rows)] == ["no role formed (mixed since step 0)",
                                                                    "role settled at step 8"]


def test_the_runs_page_carries_the_report_lines_most_important_first(tmp_path):
    from headlab.view import write_view
    from headlab.view.load import read_run

    run = RunDir(tmp_path / "run")
    for step, part in _head_metrics().groupby("step"):
        append_part(run.head_metrics_path, int(step), part)
    _ablation([0.21, 0.5, 0.01]).to_parquet(run.head_importance_path)
    run.summary_path.write_text(json.dumps({"task_queries": "[CLS]"}))
    data = read_run(run)
    assert data["report"] == report_lines(_head_metrics(), _ablation([0.21, 0.5, 0.01]), {"task_queries": "[CLS]"})
    assert data["report"][0].startswith("L0H1: from [CLS] picks tokens by content")
    page = write_view(run).read_text(encoding="utf-8")
    assert "L0H1: from [CLS] picks tokens by content" in page and "function report(lines)" in page


def test_an_lm_runs_heads_read_as_their_lm_roles_with_the_scores_and_settle_steps():
    """An LM head_metrics table (the three pattern scores, no classifier role): each line names the LM role
    by the 0.4 rule, the scores behind it, importance, and the step the LM role stopped changing (a role
    reached only at the last measurement is not settled yet, as for a classifier's roles)."""
    scores = {  # step -> per head (prev-token, duplicate, induction); H0 a previous-token head from step 10,
        0: [(0.05, 0.02, 0.03), (0.04, 0.02, 0.05), (0.30, 0.01, 0.02)],  # H1 an induction head from step 20,
        10: [(0.55, 0.02, 0.03), (0.04, 0.02, 0.20), (0.35, 0.01, 0.02)],  # H2 never over 0.4
        20: [(0.61, 0.02, 0.03), (0.04, 0.02, 0.45), (0.39, 0.01, 0.02)],
    }
    rows = [{"run_id": "r", "step": step, "epoch": 0, "layer": 0, "head": h, "metric": name, "value": v}
            for step, heads in scores.items() for h, values in enumerate(heads)
            for name, v in zip(("prev_token_score", "duplicate_score", "induction_score"), values)]
    importance = pd.DataFrame([{"run_id": "r", "step": 20, "epoch": 0, "layer": 0, "head": h, "metric": "ablation_dloss",
                                "value": v} for h, v in enumerate((0.2, 0.05, 0.001))])
    lines = report_lines(pd.DataFrame(rows), importance)
    assert lines == [
        "L0H0: a previous-token head on the induction probe (prev-token 0.61, duplicate 0.02, induction 0.03); "
        "1st most important of 3 (ablation dloss, step 20: 0.2); role settled at step 10",
        "L0H1: an induction head on the induction probe (prev-token 0.04, duplicate 0.02, induction 0.45); "
        "2nd most important of 3 (ablation dloss, step 20: 0.05); role still changing at step 20 (the last measurement)",
        "L0H2: no LM role on the induction probe (prev-token 0.39, duplicate 0.01, induction 0.02); "
        "3rd most important of 3 (ablation dloss, step 20: 0.001); no role formed (mixed since step 0)"]
