"""Every verdict states its scale: the text from job settings (hand-checked), and from a recorded sweep."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from headlab.reproduce.scale import computed_scale, job_settings, scale_text
from headlab.reproduce.spec import load_spec
from headlab.store import RunDir
from tests.reproduce.recorded import record_jobs, shipped_with_last_cpu
from tests.reproduce.test_verdicts import SPECS, heads_runs


def _job(**values):
    return {k.replace("__", "."): v for k, v in values.items()}


def test_one_setting_is_singular_and_swept_values_are_listed_in_order():
    jobs = [_job(model__n_layers=1, model__d_model=d, model__n_heads=1, trainer__max_epochs=1, seed=0, steps=s)
            for d, s in ((128, 600), (64, 32))]
    assert scale_text(jobs) == "1 layer x 64/128, 1 head, 1 epoch (32-600 steps), 1 seed"


def test_max_steps_wins_over_epochs_and_the_steps_trained_show_only_when_they_differ():
    base = dict(model__n_layers=2, model__d_model=64, model__n_heads=4, trainer__max_epochs=8, trainer__max_steps=3000)
    assert scale_text([_job(**base, steps=3000)]) == "2 layers x 64, 4 heads, 3,000 steps"
    assert scale_text([_job(**base, steps=2400)]) == "2 layers x 64, 4 heads, 3,000 steps (trained 2,400)"
    # Lightning's "no limit" (-1) is not a length: the epochs are
    assert scale_text([_job(**{**base, "trainer__max_steps": -1})]) == "2 layers x 64, 4 heads, 8 epochs"


def test_the_data_part_names_the_train_share_only_when_not_all_of_it_and_a_students_labels():
    jobs = [_job(data__source="synthetic", data__max_len=40, model__pooling="mean", data__train_fraction=f, seed=s)
            for f in (0.05, 1.0) for s in (20, 21, 22)]
    assert scale_text(jobs) == "synthetic (max_len 40, mean, train share 0.05/1), 3 seeds"
    full = [_job(data__source="synthetic", data__train_fraction=1.0)]
    assert scale_text(full) == "synthetic"
    assert scale_text([_job(data__source="zh_reviews", data__max_len=64, distill__labels=1000)]) == \
        "zh_reviews (max_len 64, 1,000 labels)"


def test_unknown_settings_are_left_out_and_nothing_known_is_empty():
    assert scale_text([_job(model__d_model=128, seed=3)]) == "d_model 128, 1 seed"
    assert scale_text([{}, _job(model__n_layers=None)]) == ""


def test_a_computed_claim_states_the_measurement_it_called_with_the_functions_defaults():
    # C1's primary (init_band) reads initialised_queries over 10 seeds; the spec passes no arguments
    assert computed_scale(load_spec(SPECS / "c01_random_directions.yaml")) == (
        "initialised_queries(d_model=768, n_heads=12, init_scale=1, n_inputs=256) computed without training, 10 seeds")


def test_a_pretrained_runs_size_comes_from_its_summary(tmp_path):
    run = RunDir(tmp_path / "c17-minilm")
    run.hydra_config_path.parent.mkdir(parents=True)
    run.hydra_config_path.write_text("model: {name: minilm, path: null}\ndata: {source: en_news, max_len: 128}\n",
                                     encoding="utf-8")
    run.summary_path.write_text(json.dumps({"kind": "analyze_hf", "model": {"name": "minilm", "n_layers": 6,
                                                                            "n_heads": 12, "d_head": 32}}))
    assert scale_text([job_settings(run.path)]) == "pretrained minilm, 6 layers x 384, 12 heads, no training, en_news (max_len 128)"



def test_an_lm_jobs_data_is_named_by_its_group_choice(tmp_path):
    run = RunDir(tmp_path / "0")  # a causal LM's data node has no `source` (RepeatTokensDataModule's keys)
    run.hydra_config_path.parent.mkdir(parents=True)
    run.hydra_config_path.write_text("model: {n_layers: 2, d_model: 64, n_heads: 4}\ndata: {max_len: 33}\n"
                                     "trainer: {max_steps: 3000}\nseed: 300\n", encoding="utf-8")
    run.hydra_file_path.write_text("hydra:\n  runtime:\n    choices: {data: repeat_tokens, model: lm}\n", encoding="utf-8")
    run.summary_path.write_text(json.dumps({"global_step": 3000}))
    assert scale_text([job_settings(run.path)]) == "2 layers x 64, 4 heads, 3,000 steps, repeat_tokens (max_len 33), 1 seed"


@pytest.fixture
def recorded_c8(tmp_path):
    """C8's confirmatory grid recorded as headlab-train saves it: since version 6 the induction LM
    (experiment=induction: 2 layers x 64, 3,000 steps on data=repeat_tokens, max_len 33; 2/4/8 heads x
    its 12 confirmatory seeds), every job finished at step 3,000 but one still running (no summary.json)."""
    spec = load_spec(shipped_with_last_cpu(SPECS, "c08_heads.yaml", tmp_path / "spec"))
    sweep = tmp_path / spec.sweep_name("cpu") / "2026-12-04_01-42-00_000000"
    (sweep / "aggregate").mkdir(parents=True)
    jobs = record_jobs(sweep, spec, "cpu", model__n_layers=["2"], model__d_model=["64"], trainer__max_steps=["3000"],
                       trainer__max_epochs=["1000"], data=["repeat_tokens"], data__max_len=["33"])
    assert len(jobs) == 36  # 3 head counts x 12 seeds
    for job in jobs[1:]:
        RunDir(job).summary_path.write_text(json.dumps({"status": "completed", "global_step": 3000}))
    heads_runs([0.86, 0.86, 0.87], [0.83, 0.829, 0.841]).to_csv(sweep / "aggregate" / "sweep_runs.csv", index=False)
    return spec, tmp_path


# max_steps wins over the LM's 1,000 epochs; its data is named by the group's choice (no `source`)
C8_SCALE = "2 layers x 64, heads 2/4/8, 3,000 steps, repeat_tokens (max_len 33), 12 seeds"


def test_a_recorded_sweep_gives_the_verdict_its_scale_in_claims_csv_and_the_summary_tables(recorded_c8, tmp_path):
    from headlab.reproduce.evidence import evaluate_claim
    from headlab.reproduce.report import write_report

    spec, root = recorded_c8
    result = evaluate_claim(spec, root, scale="cpu")
    expected = C8_SCALE
    assert result.verdict == "supported" and result.scale == expected
    out = tmp_path / "report"
    write_report([result], out)
    row = pd.read_csv(out / "claims.csv", keep_default_na=False).iloc[0]
    assert row["scale"] == expected
    # the coverage follows the scale (the table has one unusable job)
    assert f"| C8 | 5.1 | supported at {expected} (6 of 7 jobs usable) |" in (out / "claims.md").read_text(encoding="utf-8")
    page = (out / "index.html").read_text(encoding="utf-8")
    assert f"<b>supported</b> at {expected} (6 of 7 jobs usable)</td>" in page and f'<p class="scale">scale: {expected}</p>' in page


def test_a_claim_without_evidence_has_no_scale(tmp_path):
    from headlab.reproduce.evidence import evaluate_claim

    result = evaluate_claim(load_spec(shipped_with_last_cpu(SPECS, "c08_heads.yaml", tmp_path / "spec")), tmp_path / "none", scale="cpu")
    assert result.verdict == "not measured" and result.scale == ""
    # a claim the cpu plan does not run (C8 since the second ledger of 2026-12-04) is not measured there either
    result = evaluate_claim(load_spec(SPECS / "c08_heads.yaml"), tmp_path / "none", scale="cpu")
    assert result.verdict == "not measured" and "no cpu scale" in result.reason and result.scale == ""


def test_a_job_whose_saved_config_does_not_parse_is_left_out_of_the_scale(recorded_c8):
    from headlab.reproduce.scale import evidence_scale

    spec, root = recorded_c8
    sweep = next((root / spec.sweep_name("cpu")).iterdir())
    broken = RunDir(sweep / "0")
    broken.hydra_config_path.write_text("model: {n_heads: [unclosed\n", encoding="utf-8")
    broken.summary_path.write_text(json.dumps({"global_step": 99}))
    # job 0 (2 heads, seed 2000) is gone: its 99 steps do not show ("trained 99-3,000"); the other 35 jobs give the rest
    assert evidence_scale(spec, sweep) == C8_SCALE
