"""Checkpoint suites: the shipped configs name the published checkpoints, a local suite is measured
into a sweep-shaped folder that headlab-aggregate reads, a rerun resumes, hub checkpoints without
network are one line and nothing written."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from headlab.cli.analyze_hf import main
from headlab.errors import ConfigError
from headlab.hf.suite import load_suite
from headlab.hf.tiny import save_tiny, train_tokenizer
from headlab.store import SweepDir, is_sweep_dir, read_table

TEXTS = ["The film is slow, but the ending works. I liked it.", "A plain sentence; short.", "ok then",
         "Markets fell sharply on Monday as investors weighed the news."] * 8
SMALL = ["data=en_polarity", "data.probe_size=6", "data.max_len=20", "measure.map_len=8", "measure.chunk_size=8",
         "lm.probe_size=4", "lm.half_len=5", "threads=1"]
STEPS = (0, 1, 5)


def test_shipped_suites_name_the_published_checkpoints():
    pythia = load_suite("pythia-70m")
    labels = [c.label for c in pythia.checkpoints]
    assert len(labels) == 154 and pythia.seeds == [0]
    assert labels[:3] == ["EleutherAI/pythia-70m@step0", "EleutherAI/pythia-70m@step1", "EleutherAI/pythia-70m@step2"]
    assert "EleutherAI/pythia-70m@step512" in labels and "EleutherAI/pythia-70m@step1000" in labels
    assert labels[-1] == "EleutherAI/pythia-70m@step143000" and "EleutherAI/pythia-70m@step1500" not in labels
    poly = load_suite("polypythia-70m")
    assert poly.seeds == list(range(10)) and len(poly.checkpoints) == 1540
    assert poly.of_seed(3)[0].label == "EleutherAI/pythia-70m-seed3@step0"
    multi = load_suite("multiberts")
    assert multi.seeds == [0, 1, 2, 3, 4]
    assert [c.hub for c in multi.of_seed(2)][:3] == ["google/multiberts-seed_2-step_0k", "google/multiberts-seed_2-step_20k",
                                                     "google/multiberts-seed_2-step_40k"]
    assert multi.of_seed(4)[-1].hub == "google/multiberts-seed_4-step_2000k" and multi.of_seed(4)[-1].step == 2_000_000


@pytest.mark.parametrize("text, says", [
    ("name: x\n", "or `checkpoints`"),
    ("checkpoints: [{seed: 0, step: 1, path: a}, {seed: 0, step: 1, path: b}]\n", "appears twice"),
    ("checkpoints: [{seed: 0, step: -1, path: a}]\n", "step >= 0"),
    ("checkpoints: [{seed: 0, step: 1, path: a, hub: b}]\n", "exactly one of path or hub"),
])
def test_a_bad_suite_file_names_what_is_wrong(tmp_path, text, says):
    (tmp_path / "suite.yaml").write_text(text)
    with pytest.raises(ConfigError, match=says):
        load_suite(str(tmp_path))


@pytest.fixture(scope="module")
def local_suite(tmp_path_factory):
    """2 seeds x 3 'steps' of a tiny GPT-NeoX (random weights per (seed, step)), hub layout, suite.yaml."""
    root = tmp_path_factory.mktemp("suite") / "tiny"
    tok = train_tokenizer(TEXTS, True, 300)
    entries = []
    for seed in (0, 1):
        for step in STEPS:
            save_tiny("gpt_neox", root / f"seed{seed}" / f"step{step}", seed=100 * seed + step, tokenizer=tok)
            entries.append({"seed": seed, "step": step, "path": f"seed{seed}/step{step}"})
    (root / "suite.yaml").write_text(yaml.safe_dump({"name": "tiny", "checkpoints": entries}))
    return root


def test_a_local_suite_is_a_sweep_one_job_per_seed_one_measurement_per_step(local_suite, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([f"suite={local_suite}", f"run_dir={out}", "figures=false"] + SMALL) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(out)
    assert captured.err.count("measured in") == 6 and "[6/6] seed 1 step 5" in captured.err
    assert is_sweep_dir(out) and [p.name for p in SweepDir(out).job_paths()] == ["0", "1"]
    for job, seed in (("0", 0), ("1", 1)):
        assert yaml.safe_load((out / job / ".hydra" / "overrides.yaml").read_text()) == [f"seed={seed}"]
        summary = json.loads((out / job / "summary.json").read_text())
        assert summary["status"] == "completed" and summary["swept"] == {"seed": seed} and summary["steps"] == list(STEPS)
        metrics = read_table(out / job / "head_metrics.parquet")
        assert sorted(set(metrics.step)) == list(STEPS) and "rep_induction_score" in set(metrics.metric)
        assert sorted(set(read_table(out / job / "head_pairs.parquet").step)) == list(STEPS)
    # step 5 of seed 1 holds the numbers of that checkpoint measured alone
    from headlab.hf import HFModel, load_model
    from headlab.hf.analyze import AnalyzeSettings, measure_checkpoint

    model, tok, family = load_model(local_suite / "seed1" / "step5")  # measured alone, through the library
    cm = measure_checkpoint(HFModel(model), tok, AnalyzeSettings(source="en_polarity", probe_size=6, max_len=20, map_len=8,
                                                                 chunk_size=8, decoder=True, lm_probe_size=4, lm_half_len=5))
    import pandas as pd

    a = pd.DataFrame([{"layer": layer, "head": h, "metric": k, "value": float(v[h])}
                      for layer, metrics in enumerate(cm.per_layer()) for k, v in metrics.items() for h in range(len(v))])
    b = read_table(out / "1" / "head_metrics.parquet")
    for metric in ("entropy", "prev_token_score", "rep_induction_score"):
        x = a[a.metric == metric].sort_values(["layer", "head"]).value.to_numpy()
        y = b[(b.metric == metric) & (b.step == 5)].sort_values(["layer", "head"]).value.to_numpy()
        assert len(x) == 8 and (abs(x - y) < 1e-9).all()
    from headlab.sweep.aggregate import aggregate_sweep

    result = aggregate_sweep(SweepDir(out), figures=False)
    assert len(result.usable) == 2 and sorted(r.seed for r in result.usable) == [0, 1]


def test_a_rerun_skips_what_is_measured_and_redoes_a_missing_step(local_suite, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([f"suite={local_suite}", f"run_dir={out}", "figures=false"] + SMALL) == 0
    parts = out / "0" / "head_metrics.parquet"
    before = {p.name: p.stat().st_mtime_ns for p in parts.iterdir()}
    (parts / "part-000000001-0000.parquet").unlink()  # as if the run died while measuring step 1 of seed 0
    capsys.readouterr()
    assert main([f"suite={local_suite}", f"run_dir={out}", "figures=false"] + SMALL) == 0
    err = capsys.readouterr().err
    assert err.count("already measured, skipped") == 5 and "seed 0 step 1: measured in" in err
    after = {p.name: p.stat().st_mtime_ns for p in parts.iterdir()}
    assert set(after) == set(before)
    assert all(after[n] == before[n] for n in before if n != "part-000000001-0000.parquet")
    assert len(read_table(out / "0" / "head_pairs.parquet").query("step == 1")) > 0  # re-measured once, not twice
    assert read_table(out / "0" / "head_pairs.parquet").groupby("step").size().nunique() == 1


def test_another_folder_is_not_written_over(local_suite, tmp_path, capsys):
    out = tmp_path / "busy"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main([f"suite={local_suite}", f"run_dir={out}"] + SMALL) == 2
    assert "run_dir=" in capsys.readouterr().err and sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_hub_checkpoints_without_network_are_one_line_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    out, cache = tmp_path / "out", tmp_path / "hf_cache"
    assert main(["suite=pythia-70m", f"cache_dir={cache}", f"run_dir={out}"] + SMALL) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "EleutherAI/pythia-70m@step0" in lines[0] and "154" in lines[0] \
        and "download=true" in lines[0], lines
    import huggingface_hub

    def unreachable(*args, **kwargs):
        raise ConnectionError("Failed to resolve 'huggingface.co'")

    monkeypatch.setattr(huggingface_hub, "list_repo_files", unreachable)  # what a machine without network answers
    assert main(["suite=multiberts", "download=true", f"cache_dir={cache}", f"run_dir={out}"] + SMALL) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "google/multiberts-seed_0-step_0k@main" in lines[0] and "huggingface.co" in lines[0], lines
    assert not out.exists() and not (cache.exists() and any(cache.rglob("*.bin")))
    assert main(["model.hub=EleutherAI/pythia-70m", "model.revision=step0", f"cache_dir={cache}",
                 f"run_dir={out}"] + SMALL) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "EleutherAI/pythia-70m@step0" in lines[0] and not out.exists()


@pytest.mark.slow
def test_the_documented_tiny_suite_builds_measures_aggregates_and_views(tmp_path, capsys):
    """scripts/build_tiny_suite.py's path, shortened: train 2 seeds, measure every checkpoint, aggregate, view."""
    from headlab.hf.tiny import log_spaced_steps
    from headlab.lit.hf_lm import build_tiny_suite
    from headlab.sweep.aggregate import aggregate_sweep

    root = build_tiny_suite(tmp_path / "tiny-suite", seeds=(0, 1), n_steps=40, log=lambda line: None)
    steps = log_spaced_steps(40)
    assert steps == [0, 1, 2, 4, 8, 16, 32, 40] and (root / "seed1" / "step40" / "model.safetensors").is_file()
    out = tmp_path / "measured"
    assert main([f"suite={root}", f"run_dir={out}"] + SMALL) == 0
    for job in ("0", "1"):
        assert sorted(set(read_table(out / job / "head_metrics.parquet").step)) == steps
    result = aggregate_sweep(SweepDir(out))
    assert len(result.usable) == 2
    from headlab.cli.view import main as view

    assert view([str(out)]) == 0 and (out / "view.html").is_file()
    assert os.path.getsize(out / "view.html") > 1000


def test_a_tiny_bert_suite_trains_with_masked_tokens_and_is_measured(tmp_path, capsys):
    """The encoder side of the local suite: MLM training, saved with its head as MultiBERTs are, read as BertModel."""
    from headlab.hf import load_model
    from headlab.lit.hf_lm import build_tiny_suite

    root = build_tiny_suite(tmp_path / "bert-suite", seeds=(0,), n_steps=2, family="bert", log=lambda line: None)
    first, last = load_model(root / "seed0" / "step0")[0], load_model(root / "seed0" / "step2")[0]
    assert type(first).__name__ == "BertModel"
    moved = first.encoder.layer[0].attention.self.query.weight - last.encoder.layer[0].attention.self.query.weight
    assert moved.abs().max() > 0  # 2 optimiser steps changed the encoder's weights
    out = tmp_path / "out"
    assert main([f"suite={root}", f"run_dir={out}", "figures=false"] + SMALL) == 0
    assert sorted(set(read_table(out / "0" / "head_metrics.parquet").step)) == [0, 1, 2]
    assert "rep_induction_score" not in set(read_table(out / "0" / "head_metrics.parquet").metric)
