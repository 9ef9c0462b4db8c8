"""headlab-analyze-hf importance=true: the table is headlab.interventions on the fitted classifier of a pretrained
encoder (a tiny BERT saved in the hub layout here: the same path as MiniLM, 8 heads instead of 72)."""

from __future__ import annotations

import json

import pytest
import torch

from headlab.cli.analyze_hf import main
from tests._runs import compose_command
from headlab.tasks.pretrained import CONFIG_MODULE, AnalyzeHFConfig
from headlab.tasks.pretrained import analyze_pretrained as run
from headlab.errors import ConfigError, DataError
from headlab.hf import HFClassifier, HFEncoder, fit_linear_head
from headlab.hf.importance import stratified_split
from headlab.hf.texts import load_labeled
from headlab.interventions import gradient_importance, heads_for_share, rank_heads, single_head_ablation
import pandas as pd

TINY = ["data=synthetic", "data.synthetic.n=16", "data.probe_size=4", "data.max_len=24", "measure.map_len=8",
        "measure.weight_metrics=false", "importance=true", "classifier.steps=30", "classifier.batch_size=4"]


LAYERS, HEADS = 2, 4


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A randomly initialised 2-layer, 4-head BERT and its WordPiece tokenizer, trained on the data's texts."""
    from headlab.hf.tiny import save_tiny

    texts = load_labeled("synthetic", synthetic_n=16).texts
    return save_tiny("bert", tmp_path_factory.mktemp("tiny_bert"), seed=0, texts=texts, n_layers=LAYERS, n_heads=HEADS)


def _grid(table, metric: str) -> torch.Tensor:
    rows = table[table.metric == metric].sort_values(["layer", "head"])
    assert list(zip(rows["layer"], rows["head"])) == [(l, h) for l in range(LAYERS) for h in range(HEADS)]
    return torch.tensor(rows.value.to_numpy()).reshape(LAYERS, HEADS)


def test_the_table_is_ablation_and_gradient_importance_of_the_fitted_head_on_the_held_out_part(tmp_path, tiny_bert, capsys):
    from headlab.hf import load_encoder

    run_dir = tmp_path / "run"
    assert main(TINY + [f"model.path={tiny_bert}", f"run_dir={run_dir}"]) == 0
    table = pd.read_parquet(run_dir / "head_importance.parquet")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(table.columns) >= {"run_id", "step", "epoch", "layer", "head", "metric", "value"}
    assert set(table.metric) == {"ablation_dloss", "ablation_dacc", "ablation_df1", "grad_importance",
                                 "grad_importance_l2", "random_score"} and set(table.step) == {0}
    # the same net and data built here by hand: labels, split, tokenisation, head fit
    model, tokenizer = load_encoder(tiny_bert)
    data = load_labeled("synthetic", synthetic_n=16)
    train_idx, test_idx = stratified_split(data.labels, 0.5, 0)
    assert sorted(train_idx + test_idx) == list(range(16)) and summary["importance"]["n_test"] == len(test_idx) == 8

    def batches(idx):
        out = []
        for start in range(0, len(idx), 4):
            pick = idx[start : start + 4]
            enc = tokenizer([data.texts[i] for i in pick], padding=True, truncation=True, max_length=24, return_tensors="pt")
            out.append({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"].bool(),
                        "labels": torch.tensor([data.labels[i] for i in pick])})
        return out

    net = HFClassifier(HFEncoder(model), n_classes=2)
    fit_linear_head(net, batches(train_idx), steps=30, lr=0.1, seed=0)
    test = batches(test_idx)
    ablation, gradient = single_head_ablation(net, test), gradient_importance(net, test)
    torch.testing.assert_close(_grid(table, "ablation_dloss"), ablation.dloss.double(), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(_grid(table, "ablation_dacc"), ablation.dacc.double(), atol=1e-6, rtol=0)
    torch.testing.assert_close(_grid(table, "grad_importance"), gradient.double(), atol=1e-5, rtol=1e-4)
    assert ablation.dloss.abs().max() > 1e-4  # heads do matter: the comparison is not of zeros
    imp = summary["importance"]
    assert imp["heads_for_half_ablation_effect"] == heads_for_share(ablation.dloss, 0.5)
    assert imp["top_heads"]["ablation"] == [f"L{l}H{h}" for l, h in rank_heads(ablation.dloss)[:5]]
    assert "importance.png" in summary["figures"] and (run_dir / "figures" / "importance.png").is_file()


def test_an_unlabelled_source_is_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["data=en_news", "importance=true", f"run_dir={run_dir}"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "invalid config importance=True" in lines[0] and "en_news has no labels" in lines[0]
    assert not run_dir.exists()


@pytest.mark.parametrize("override, key", [("classifier.test_share=1.0", "classifier.test_share"),
                                           ("classifier.steps=0", "classifier.steps"),
                                           ("classifier.lr=-1", "classifier.lr")])
def test_bad_classifier_settings_name_the_key_before_anything_loads(override, key, tmp_path):
    with pytest.raises(ConfigError) as err:
        run(compose_hf(["data=en_polarity", "importance=true", override, "model.path=/nonexistent",
                     f"run_dir={tmp_path / 'run'}"]))
    assert err.value.key == key  # before model.path is looked at
    assert not (tmp_path / "run").exists()


def test_stratified_split_holds_out_the_share_of_each_class_and_is_seeded():
    labels = [0] * 10 + [1] * 4 + [2] * 2
    train, test = stratified_split(labels, 0.25, seed=3)
    assert not set(train) & set(test) and sorted(train + test) == list(range(16))
    assert [sum(labels[i] == c for i in test) for c in range(3)] == [2, 1, 1]  # round(2.5)=2, 1, at least 1
    assert (train, test) == stratified_split(labels, 0.25, seed=3) != stratified_split(labels, 0.25, seed=4)
    with pytest.raises(DataError, match="class 1 has 1 example"):  # a class cannot sit in both parts
        stratified_split([0, 0, 1], 0.5, seed=0)


def compose_hf(overrides):
    return compose_command("analyze", overrides, CONFIG_MODULE, schema=AnalyzeHFConfig)
