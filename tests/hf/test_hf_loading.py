"""Loading any family from a local folder, safely: safetensors first, a `.bin` only through
`weights_only`, no model code ever; and `headlab-analyze-hf model.path=DIR` on a decoder."""

from __future__ import annotations

import json
import pathlib

import pytest
import torch

from headlab.cli.analyze_hf import main
from headlab.errors import ConfigError
from headlab.hf import HFModel, load_model
from headlab.hf.tiny import save_tiny, train_tokenizer
from headlab.measure import capture_patterns
from headlab.store import read_table

TEXTS = ["The film is slow, but the ending works. I liked it.", "A plain sentence; short.", "ok then",
         "Markets fell sharply on Monday as investors weighed the news."] * 8
SMALL = ["data=en_polarity", "data.probe_size=8", "data.max_len=24", "measure.map_len=8", "measure.chunk_size=8",
         "lm.probe_size=4", "lm.half_len=5", "threads=1"]


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    return save_tiny("bert", tmp_path_factory.mktemp("bert") / "m", tokenizer=train_tokenizer(TEXTS, False, 300))


@pytest.fixture(scope="module")
def neox_dir(tmp_path_factory):
    return save_tiny("gpt_neox", tmp_path_factory.mktemp("neox") / "m", tokenizer=train_tokenizer(TEXTS, True, 300))


def _copy_without_weights(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    dst.mkdir()
    for f in src.iterdir():
        if f.name != "model.safetensors":
            (dst / f.name).write_bytes(f.read_bytes())
    return dst


class _RunsCode:
    """A pickle that would create a file when unpickled (what a malicious pytorch_model.bin does)."""

    def __init__(self, marker: pathlib.Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


def test_a_bin_that_would_run_code_is_refused_in_one_line_and_nothing_runs_or_is_written(bert_dir, tmp_path, capsys):
    folder = _copy_without_weights(bert_dir, tmp_path / "evil")
    marker = tmp_path / "pwned"
    torch.save({"weight": _RunsCode(marker)}, folder / "pytorch_model.bin")
    with pytest.raises(ConfigError, match="weights_only=True"):
        load_model(folder)
    assert main([f"model.path={folder}", f"run_dir={tmp_path / 'run'}"] + SMALL) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "pytorch_model.bin is refused" in lines[0], lines
    assert "\x1b" not in lines[0]  # torch's terminal bold codes are not passed on
    assert not marker.exists() and not (tmp_path / "run").exists()


def test_a_plain_bin_state_dict_loads_like_the_safetensors(bert_dir, tmp_path):
    folder = _copy_without_weights(bert_dir, tmp_path / "bin")
    safe_model, tok, _ = load_model(bert_dir)
    torch.save(safe_model.state_dict(), folder / "pytorch_model.bin")
    bin_model, _, family = load_model(folder)
    assert family.name == "bert"
    batch = tok(TEXTS[:2], padding=True, return_tensors="pt")
    with torch.no_grad():
        a = capture_patterns(HFModel(safe_model), batch["input_ids"], batch["attention_mask"].bool())
        b = capture_patterns(HFModel(bin_model), batch["input_ids"], batch["attention_mask"].bool())
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, atol=0, rtol=0)


def test_trust_remote_code_and_custom_code_configs_are_refused(bert_dir, tmp_path, capsys):
    assert main([f"model.path={bert_dir}", "model.trust_remote_code=true", f"run_dir={tmp_path / 'run'}"] + SMALL) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "model.trust_remote_code=True" in lines[0] and "own code" in lines[0]
    custom = tmp_path / "custom"
    custom.mkdir()
    for f in bert_dir.iterdir():
        (custom / f.name).write_bytes(f.read_bytes())
    config = json.loads((custom / "config.json").read_text())
    (custom / "config.json").write_text(json.dumps({**config, "auto_map": {"AutoModel": "modeling_evil.EvilModel"}}))
    assert main([f"model.path={custom}", f"run_dir={tmp_path / 'run'}"] + SMALL) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "auto_map" in lines[0] and "trust_remote_code" in lines[0]
    assert not (tmp_path / "run").exists()


def test_a_decoder_folder_gets_the_run_contract_and_the_lm_scores(neox_dir, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main([f"model.path={neox_dir}", f"run_dir={run_dir}"] + SMALL) == 0
    assert capsys.readouterr().out.strip() == str(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["model"]["family"] == "gpt_neox" and summary["model"]["decoder"] is True
    assert len(summary["lm"]["roles"]) == 2 and summary["data"]["lm_half_len"] == 5
    metrics = read_table(run_dir / "head_metrics.parquet")
    lm = {"prev_token_score", "duplicate_score", "induction_score", "rep_induction_score", "copying_score"}
    assert lm | {"entropy", "cls_attention", "role"} <= set(metrics.metric)
    assert len(metrics[metrics.metric == "rep_induction_score"]) == 2 * 4 and set(metrics.step) == {0}
    # the probe starts with BOS: cls_attention is the mass on it, a share of each row
    cls = metrics[metrics.metric == "cls_attention"].value
    assert ((cls > 0) & (cls <= 1)).all()


def test_importance_on_a_decoder_is_refused(neox_dir, tmp_path):
    from tests._runs import compose_command
    from headlab.tasks.pretrained import CONFIG_MODULE, AnalyzeHFConfig, analyze_pretrained

    with pytest.raises(ConfigError) as err:
        analyze_pretrained(compose_command("analyze", [f"model.path={neox_dir}", "importance=true",
                                                       f"run_dir={tmp_path / 'run'}"] + SMALL, CONFIG_MODULE,
                                                      schema=AnalyzeHFConfig))
    assert err.value.key == "importance" and not (tmp_path / "run").exists()
