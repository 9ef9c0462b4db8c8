"""headlab-analyze-hf: the run contract for MiniLM, and one line + exit 2 for each bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from headlab.analysis import ROLES
from headlab.cli.analyze_hf import main
from tests._runs import compose_command, train_in_process
from headlab.tasks.pretrained import CONFIG_MODULE, AnalyzeHFConfig
from headlab.errors import ConfigError
from headlab.hf import AnalyzeSettings, HFEncoder
from headlab.hf.analyze import build_probe
from headlab.measure import measure_probe
from headlab.store import read_table

SMALL = ["data=en_polarity", "data.probe_size=24", "measure.map_len=8", "measure.chunk_size=8"]


def test_writes_the_run_contract_with_the_seams_numbers(tmp_path, minilm, capsys):
    run_dir = tmp_path / "run"
    assert main(SMALL + [f"run_dir={run_dir}"]) == 0
    assert capsys.readouterr().out.strip() == str(run_dir)
    metrics, pairs = read_table(run_dir / "head_metrics.parquet"), read_table(run_dir / "head_pairs.parquet")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["data"]["unk_rate"] == 0.0
    assert {k: summary["model"][k] for k in ("name", "n_layers", "n_heads", "d_head", "architecture", "family",
                                             "decoder")} == {"name": "minilm", "n_layers": 6, "n_heads": 12, "d_head": 32,
                                                             "architecture": "BertModel", "family": "bert", "decoder": False}
    assert {"attention_grid.png", "head_similarity.png"} <= {p.name for p in (run_dir / "figures").iterdir()}
    assert (run_dir / ".hydra" / "config.yaml").is_file()
    # the same numbers as the seam on the same probe, recomputed independently of the files
    model, tokenizer = minilm
    probe, _ = build_probe(tokenizer, AnalyzeSettings(source="en_polarity", probe_size=24))
    m = measure_probe(HFEncoder(model), probe.chunks(8), map_len=8)
    entropy = metrics[metrics.metric == "entropy"].sort_values(["layer", "head"]).value.to_numpy()
    np.testing.assert_allclose(entropy, np.concatenate([layer["entropy"] for layer in m.head_metrics]), atol=1e-9)
    roles = metrics[metrics.metric == "role"].sort_values(["layer", "head"]).value.astype(int)
    assert [ROLES[r] for r in roles] == [r for layer in m.roles for r in layer] == sum(summary["roles"], [])
    assert set(pairs.metric) >= {"js", "q_cosine"} and len(pairs[pairs.metric == "js"]) == 6 * 12 * 12
    assert len(summary["layers"]) == 6 and summary["layers"][0]["prev_score_max"] > 0.5  # MiniLM has a prev head in L0


def test_mostly_unk_data_is_refused_before_anything_is_written(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["data=zh_reviews", "data.probe_size=32", f"run_dir={run_dir}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "[UNK]" in err[0] and "data.max_unk_rate" in err[0]
    assert not run_dir.exists()


@pytest.mark.parametrize("overrides, key", [
    (["model.path=/nonexistent/folder"], "model.path"),
    (["data.probe_size=many"], "data.probe_size"),
    (["data.nope=1"], "data.nope"),
    (["data=klingon"], "data"),
    (["data=files"], "data.files.train"),
    (["data.source=klingon"], "data.source"),
    (["nope.x=1"], "nope"),  # the unknown key is the first part: nope is not in the config
    (["threads=all"], "threads"),
])
def test_config_mistakes_name_the_key(overrides, key, tmp_path):
    with pytest.raises(ConfigError) as err:
        from headlab.tasks.pretrained import analyze_pretrained as run

        run(compose_hf(overrides + [f"run_dir={tmp_path / 'run'}"]))
    assert err.value.key == key
    assert not (tmp_path / "run").exists()


def test_a_folder_without_weights_and_a_model_without_attention_exit_2_with_one_line(tmp_path, minilm, monkeypatch, capfd):
    from transformers import FNetConfig, FNetModel

    no_weights = tmp_path / "no_weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text("{}")
    # the console script's main, its exit code and stderr (tests/cli/test_every_command.py runs the real executables)
    proc = train_in_process(tmp_path, monkeypatch, capfd, f"model.path={no_weights}", prog="headlab-analyze-hf")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("headlab-analyze-hf: error: invalid config model.path=") and \
        "weights" in lines[0]
    fnet = tmp_path / "fnet"  # a real, loadable encoder whose layers mix tokens by FFT: no attention to return
    FNetModel(FNetConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, intermediate_size=32)).save_pretrained(fnet)
    minilm[1].save_pretrained(fnet)
    assert main([f"model.path={fnet}", "data=en_polarity", f"run_dir={tmp_path / 'run'}"]) == 2
    lines = capfd.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "family headlab reads" in lines[0] and "'fnet'" in lines[0]
    assert not (tmp_path / "logs").exists() and not (tmp_path / "run").exists()


def compose_hf(overrides):
    return compose_command("analyze", overrides, CONFIG_MODULE, schema=AnalyzeHFConfig)
