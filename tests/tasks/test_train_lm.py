"""experiment=induction end to end, tiny: the run contract holds for a causal LM."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests._runs import compose_train_config, train_keeping_threads

TINY_LM = ["experiment=induction", "trainer.max_steps=10", "data.n_train=320", "data.n_eval=64", "data.probe_size=8",
           "callbacks.lm_metrics.every_n_steps=4", "trainer.enable_model_summary=false"]


def test_induction_experiment_trains_measures_and_summarises(tmp_path, one_thread):
    run = tmp_path / "run"
    summary = train_keeping_threads(compose_train_config(run, TINY_LM))
    assert summary["status"] == "completed" and summary["global_step"] == 10
    assert json.loads((run / "summary.json").read_text())["lm"]["induction_onset_steps"].keys() == {
        f"L{layer}H{head}" for layer in range(2) for head in range(4)}
    assert 0 <= summary["val_acc"] <= 1 and summary["n_measurements"] == 4  # steps 0, 4, 8 and fit end (10)
    rows = pd.read_parquet(run / "head_metrics.parquet")
    assert set(rows["metric"]) == {"prev_token_score", "duplicate_score", "induction_score", "copying_score",
                                   "causal_entropy_norm", "rep_induction_score",  # the standard test, every measurement
                                   "cum_grad_norm", "dist_from_init"}  # how far each head moved (tests/tasks/test_lm_movement.py)
    assert sorted(rows["step"].unique()) == [0, 4, 8, 10]
    scores = rows[~rows.metric.isin(["copying_score", "cum_grad_norm", "dist_from_init"])]  # the last two: not shares
    assert scores["value"].between(0, 1).all() and (rows[rows.metric == "cum_grad_norm"]["value"] >= 0).all()
    assert len(summary["lm"]["final_roles"]) == 2
    final_rep = rows[(rows.metric == "rep_induction_score") & (rows.step == 10)].sort_values(["layer", "head"])["value"]
    assert [v for layer in summary["lm"]["final_rep_induction_score"] for v in layer] == pytest.approx(final_rep.tolist(), abs=1e-4)
    # 256 standard sequences: the ICL score's standard error is reported and small; the 8-sequence probe's is not
    assert 0 < summary["lm"]["final_rep_icl_score_se"] < 0.05 < summary["lm"]["final_icl_score_se"]
    curve = pd.read_csv(run / "metrics.csv")
    assert {"lm/icl_score_se", "lm/rep_icl_score", "lm/rep_icl_score_se"} <= set(curve.columns)
    assert {p.name for p in (run / "figures").iterdir()} == {"induction_phase.png", "induction_grid.png"}
    # view.html is written after summary.json: its LM panel (scores, onset ticks) is there only when the page read the lm block
    assert '"lm":{"scores":["prev_token_score"' in (run / "view.html").read_text(encoding="utf-8")


def test_one_layer_control_composes_with_one_layer(tmp_path):
    cfg = compose_train_config(tmp_path / "r", TINY_LM + ["model.n_layers=1"])
    assert cfg.model.n_layers == 1 and cfg.model.attn_only is True and cfg.data.max_len == cfg.model.max_len


def test_a_bad_repeat_key_fails_at_composition_or_construction(tmp_path):
    from headlab.data.lm_datamodule import RepeatTokensDataModule
    from headlab.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^invalid config data\.vocab_size='many': expected an integer, e\.g\. 64$"):
        compose_train_config(tmp_path / "r", TINY_LM + ["data.vocab_size=many"])  # the datamodule's signature types it
    with pytest.raises(ConfigError, match="data.probe_half_len"):
        RepeatTokensDataModule(max_len=33, probe_half_len=17)


def test_sweep_induction_grids_layers_mlp_and_five_seeds(tmp_path):
    cfg = compose_train_config_with_hydra(tmp_path, ["sweep=induction"])
    params = cfg.hydra.sweeper.params
    assert params["model.n_layers"] == "1,2" and params["model.attn_only"] == "true,false"
    assert params["seed"] == "0,1,2,3,4"


def compose_train_config_with_hydra(tmp_path, overrides):
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module("headlab.conf", version_base="1.3"):
        return compose("train", overrides=overrides, return_hydra_config=True)


def test_a_character_lm_on_the_users_own_csv_trains_and_reports_roles(tmp_path, one_thread):
    csv = tmp_path / "texts.csv"
    csv.write_text("text\n" + "\n".join(f"今天天气很好{i % 7}，我们去公园散步。" for i in range(80)) + "\n", encoding="utf-8")
    run = tmp_path / "run"
    overrides = ["experiment=induction", "data=files_lm", f"data.files.train={csv}", "data.max_len=17", "data.min_freq=1",
                 "data.probe_half_len=4", "data.probe_max_gap=4", "data.probe_size=4", "data.probe_vocab=8",
                 "trainer.max_steps=6", "callbacks.lm_metrics.every_n_steps=3", "trainer.enable_model_summary=false"]
    summary = train_keeping_threads(compose_train_config(run, overrides))
    assert summary["status"] == "completed" and summary["data"]["source"] == "files_lm"
    assert summary["data"]["probe_vocab"] == 8
    roles = summary["lm"]["final_roles"]  # per layer, per head
    assert len(roles) == 2 and all(len(layer) == 4 and set(layer) <= {"previous", "duplicate", "induction", "other"} for layer in roles)


def test_experiment_induction_zh_is_the_induction_model_on_the_reviews(tmp_path):
    cfg = compose_train_config(tmp_path / "r", ["experiment=induction_zh"])
    assert cfg.data._target_.endswith("ReviewsLMDataModule") and cfg.module._target_.endswith("CausalLMModule")
    assert cfg.model.n_layers == 2 and cfg.model.attn_only is True and cfg.data.probe_vocab == 256
    assert 1 + cfg.data.probe_max_gap + 2 * cfg.data.probe_half_len <= cfg.data.max_len == cfg.model.max_len


def test_dense_window_from_the_command_line_measures_finer_inside_it(tmp_path, one_thread):
    run = tmp_path / "run"
    dense = ["callbacks.lm_metrics.dense_every_n_steps=2", "callbacks.lm_metrics.dense_from=4",
             "callbacks.lm_metrics.dense_to=8", "callbacks.lm_metrics.figures=false"]
    train_keeping_threads(compose_train_config(run, TINY_LM + dense))
    assert sorted(pd.read_parquet(run / "head_metrics.parquet")["step"].unique()) == [0, 4, 6, 8, 10]
