"""The suites scale (`make reproduce SCALE=suites`): a spec's evidence.suites block, the job that
measures the suite, the dry run that says what it would load, and the claim read from the suite's
sweep-shaped tables with the spec's own statistics (hand-built tables here; the whole path on the
local tiny suite in the slow test)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from headlab.errors import ConfigError
from headlab.reproduce.evidence import evaluate_claim, suite_statistics
from headlab.reproduce.jobs import suite_jobs
from headlab.reproduce.runner import Runner
from headlab.reproduce.spec import load_spec, load_specs
from headlab.reproduce.verdict import NOT_MEASURED, NOT_TESTABLE

SHIPPED = Path(__file__).resolve().parents[2] / "conf" / "reproduce"
SUITE_CLAIMS = ["C1", "C2", "C4", "C14", "C17"]

SPEC = """
claim: C2
version: 1
title: heads of a layer split into types
section: "1.1"
article: {zh: 字, en: word}
evidence:
  sweep: lm_roles
  quick: {sweep_name: lm-types, overrides: ["seed=0,1"]}
  full: {sweep_name: lm-types-full, overrides: ["seed=0,1"]}
  suites:
    suite: SUITE
    sweep_name: tiny-suite-news
    command: [data=en_news]
    not_swept: [optim]
    reason: a suite of two-layer models
  table: sweep_heads.csv
statistics:
  formed:
    kind: mean
    where: {optim: adamw_constant}
    column: final_type
    reduce: fraction_in
    values: [local_diagonal, distant_points]
primary: formed
margin: {value: 0.5, no_effect: 0.0, reason: "paraphrase: half the heads"}
prerequisite: {reason: nothing has to form}
"""


def _suite_yaml(folder: Path, name: str = "tiny-suite", seeds=(0, 1, 2)) -> Path:
    """A suite file naming local folders (never loaded by these tests unless they exist)."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = [{"seed": s, "step": k, "path": f"seed{s}/step{k}"} for s in seeds for k in (0, 10)]
    (folder / "suite.yaml").write_text(yaml.safe_dump({"name": name, "checkpoints": entries}))
    return folder


def _spec(tmp_path: Path, suite: Path, text: str = SPEC) -> Path:
    path = tmp_path / "specs" / "c02_types.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.replace("SUITE", str(suite)), encoding="utf-8")
    return path


def _measured_suite(folder: Path, name: str, types: dict[int, list[str]]) -> Path:
    """A sweep-shaped folder as headlab-analyze-hf suite=... and headlab-aggregate leave it: multirun.yaml
    naming the suite, one job per seed, and aggregate/sweep_heads.csv with each head's final type."""
    folder.mkdir(parents=True)
    (folder / "multirun.yaml").write_text(yaml.safe_dump({"suite": {"name": name, "origin": "x", "seeds": list(types)}}))
    rows = []
    for job, (seed, kinds) in enumerate(types.items()):
        (folder / str(job) / ".hydra").mkdir(parents=True)
        (folder / str(job) / ".hydra" / "config.yaml").write_text("data: {source: en_news}\n")
        (folder / str(job) / "summary.json").write_text(json.dumps({
            "status": "completed", "kind": "analyze_hf_suite", "suite": name, "swept": {"seed": seed},
            "data": {"source": "en_news", "max_len": 128},
            "checkpoints": [{"step": k, "model": {"family": "gpt_neox", "n_layers": 2, "n_heads": 2, "d_head": 8}}
                            for k in (0, 10)]}))
        rows += [{"job": job, "seed": seed, "layer": i // 2, "head": i % 2, "final_type": t, "usable": True}
                 for i, t in enumerate(kinds)]
    (folder / "aggregate").mkdir()
    pd.DataFrame(rows).to_csv(folder / "aggregate" / "sweep_heads.csv", index=False)
    return folder


# ---- the spec block -------------------------------------------------------------------------------

def test_the_shipped_suite_claims_read_one_suite_and_their_rules_are_untouched():
    specs = {s.claim: s for s in load_specs(SHIPPED)}
    assert sorted((c for c, s in specs.items() if s.evidence.suites is not None), key=lambda c: int(c[1:])) == SUITE_CLAIMS
    jobs = suite_jobs(list(specs.values()))
    assert [(j.suite, j.claims) for j in jobs] == [("polypythia-70m", tuple(SUITE_CLAIMS))]
    # the block adds no statistic and changes no selection but the training setting a suite does not have
    for claim in SUITE_CLAIMS:
        spec = specs[claim]
        changed = {n for n, s in suite_statistics(spec).items() if s != spec.statistics[n]}
        dropped = set(spec.evidence.suites.not_swept)
        assert all(set(spec.statistics[n].where) - set(suite_statistics(spec)[n].where) == dropped for n in changed)
        assert (claim in ("C2", "C4", "C14")) == bool(changed)
    # C2 version 4 reads the 4-head jobs of the LM sweep it shares with C8 and C16; a suite has one head count
    # (PolyPythia: 8 a layer), so every statistic reads all its heads, and only the head count is dropped
    c2 = specs["C2"]
    assert c2.evidence.suites.not_swept == ["model.n_heads"]
    assert all(s.where.get("model.n_heads") == 4 for s in c2.statistics.values())
    assert {n: dict(s.where) for n, s in suite_statistics(c2).items()} == \
        {"types": {}, "types_layer0": {"layer": 0}, "types_layer1": {"layer": 1}, "formed": {}, "uniform_share": {}}
    assert {n: dict(suite_statistics(specs[c])[n].where) for c in ("C4", "C14") for n in specs[c].statistics} == \
        {"settle_median": {}, "early": {}, "kappa": {}, "same_role": {}}  # the lr 3e-3 constant cell of an optimiser grid


@pytest.mark.parametrize("change, says", [
    ("not_swept: [optim]", "not_swept=['optimiser']: expected keys the statistics select on (optim)"),
    ("command: [data=en_news]", "command=['suite=x']: expected settings other than suite= and run_dir="),
    ("reason: a suite of two-layer models", "reason='': expected a value (required)"),
])
def test_a_bad_suites_block_is_one_line_naming_the_key(tmp_path, change, says):
    wrong = {"not_swept: [optim]": "not_swept: [optimiser]", "command: [data=en_news]": "command: [suite=x]",
             "reason: a suite of two-layer models": 'reason: ""'}[change]
    path = _spec(tmp_path, _suite_yaml(tmp_path / "suite"), SPEC.replace(change, wrong))
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert "\n" not in str(err.value) and f"c02_types.yaml: evidence.suites.{says}" in str(err.value), str(err.value)


def test_claims_that_give_one_folder_two_suites_are_refused(tmp_path):
    one = load_spec(_spec(tmp_path / "a", _suite_yaml(tmp_path / "s1")))
    two = load_spec(_spec(tmp_path / "b", _suite_yaml(tmp_path / "s2")))
    with pytest.raises(ConfigError, match="a sweep_name of its own"):
        suite_jobs([one, two])
    mine = _suite_yaml(tmp_path / "s3", name="mine")
    # use_suite= replaces both, in a folder named after it (the spec's tiny-suite-news names another suite)
    assert [(j.suite, j.sweep_name) for j in suite_jobs([one, two], suite=str(mine))] == [(str(mine), "mine-tiny-suite-news")]


# ---- the dry run ----------------------------------------------------------------------------------

def test_the_dry_run_says_which_suite_which_checkpoints_and_where_from(tmp_path):
    lines: list[str] = []
    hub = tmp_path / "hub.yaml"
    hub.write_text(yaml.safe_dump({"name": "hubby", "seeds": {0: {"hub": "org/m", "revision": "step{step}"},
                                                              3: {"hub": "org/m-seed3", "revision": "step{step}"}},
                                   "steps": [0, 1, 2, 4, 8, 16, 1000]}))
    spec = load_spec(_spec(tmp_path, hub, SPEC.replace("[data=en_news]", f"[data=en_news, cache_dir={tmp_path / 'cache'}]")))
    runner = Runner(tmp_path / "sweeps", tmp_path / "runs", "suites", "basic", dry_run=True, say=lines.append,
                    bin_dir=Path("/venv/bin"))
    runner.run_suite(suite_jobs([spec])[0])
    text = "\n".join(lines)
    assert lines[0] == "# tiny-suite-news: C2"
    assert f"suite hubby ({hub}): 14 checkpoints, 2 seeds" in text
    assert "seed 0: 7 steps (0, 1, 2, 4, ..., 1000) from hub org/m (revisions step0 ... step1000)" in text
    assert "seed 3: 7 steps (0, 1, 2, 4, ..., 1000) from hub org/m-seed3 (revisions step0 ... step1000)" in text
    assert "0 of 14 hub checkpoints in the local cache; the other 14 download with download=true" in text
    folder = tmp_path / "sweeps" / "tiny-suite-news" / "reproduce"
    assert f"/venv/bin/headlab-analyze-hf suite={hub} data=en_news cache_dir={tmp_path / 'cache'} run_dir={folder} " \
           f"figures=false threads=" in text
    assert text.endswith(f"then: /venv/bin/headlab-aggregate {folder}")
    assert not (tmp_path / "sweeps").exists()  # a dry run writes nothing


# ---- reading a measured suite ---------------------------------------------------------------------

def test_a_claim_reads_the_suites_table_with_its_own_statistic(tmp_path):
    suite = _suite_yaml(tmp_path / "suite")
    spec = load_spec(_spec(tmp_path, suite))
    folder = _measured_suite(tmp_path / "sweeps" / "tiny-suite-news" / "reproduce", "tiny-suite", {
        0: ["local_diagonal", "untyped", "uniform", "distant_points"],      # share formed 2/4
        1: ["untyped", "untyped", "local_diagonal", "untyped"],             # 1/4
        2: ["distant_points", "local_diagonal", "untyped", "uniform"]})        # 2/4
    result = evaluate_claim(spec, tmp_path / "sweeps", scale="suites")
    formed = result.statistics["formed"]
    shares = np.array([0.5, 0.25, 0.5])
    half = 4.302652729911275 * shares.std(ddof=1) / math.sqrt(3)  # t(0.975, 2) by hand
    assert formed.n == 3 and formed.mean == pytest.approx(5 / 12)
    assert (formed.ci_low, formed.ci_high) == pytest.approx((5 / 12 - half, 5 / 12 + half))
    assert result.source == str(folder / "aggregate" / "sweep_heads.csv")
    assert result.provenance.startswith(f"read {folder} (suite tiny-suite, 3 of 3 seeds")
    assert result.provenance.endswith("selection keys dropped (one training run per seed): optim")
    assert result.scale == ("pretrained suite tiny-suite: gpt_neox 2 layers x 16, 2 heads, 2 checkpoints (steps 0-10), "
                            "en_news (max_len 128), 3 seeds")
    assert result.spec is spec  # the report shows the spec as written


def test_another_suites_folder_or_none_is_not_read(tmp_path):
    spec = load_spec(_spec(tmp_path, _suite_yaml(tmp_path / "suite")))
    assert evaluate_claim(spec, tmp_path / "sweeps", scale="suites").reason.startswith("no measured suite in ")
    _measured_suite(tmp_path / "sweeps" / "tiny-suite-news" / "reproduce", "other-suite", {0: ["uniform"] * 4})
    result = evaluate_claim(spec, tmp_path / "sweeps", scale="suites")
    assert result.verdict == NOT_MEASURED
    assert "holds suite 'other-suite', the claim reads 'tiny-suite'" in result.reason


def test_a_claim_without_a_suites_block_is_not_measured_at_that_scale():
    spec = next(s for s in load_specs(SHIPPED) if s.claim == "C8")
    result = evaluate_claim(spec, "/nonexistent", scale="suites")
    assert result.verdict == NOT_MEASURED and "no suites block" in result.reason


@pytest.mark.slow  # trains a tokenizer and saves two tiny models: about 10 s
def test_c1_reads_the_queries_of_each_seeds_step0_checkpoint(tmp_path):
    """C1 at the suites scale: the query cosines of every layer of each seed's step-0 checkpoint, checked
    against the GPT-NeoX weights read by hand (fused query_key_value, per head [q, k, v])."""
    pytest.importorskip("transformers")
    from safetensors.torch import load_file

    import torch

    from headlab.hf.tiny import save_tiny, train_tokenizer
    from headlab.reproduce.directions import cosine_summary
    from headlab.reproduce.evidence import checkpoint_query_cosines, suite_computed_statistics

    tok = train_tokenizer(["a plain sentence, short.", "another one here"] * 8, True, 300)
    root = tmp_path / "suite"
    entries = []
    for seed in (0, 1):
        save_tiny("gpt_neox", root / f"seed{seed}" / "step0", seed=seed, tokenizer=tok)
        entries.append({"seed": seed, "step": 0, "path": f"seed{seed}/step0"})
    (root / "suite.yaml").write_text(yaml.safe_dump({"name": "tiny", "checkpoints": entries}))
    got = checkpoint_query_cosines(str(root), 0, None, n_inputs=16)
    for seed in (0, 1):
        folder = root / f"seed{seed}" / "step0"
        config = json.loads((folder / "config.json").read_text())
        n_heads, d_model = config["num_attention_heads"], config["hidden_size"]
        d_head = d_model // n_heads
        weights = load_file(folder / "model.safetensors")
        x = torch.randn(16, d_model, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
        expected = []
        for layer in range(config["num_hidden_layers"]):
            fused = weights[f"gpt_neox.layers.{layer}.attention.query_key_value.weight"].double()  # [3 * d_model, d_model]
            q = [torch.nn.functional.normalize(x @ fused[h * 3 * d_head: h * 3 * d_head + d_head].T, dim=-1)
                 for h in range(n_heads)]
            expected += [(q[a] * q[b]).sum(-1) for a in range(n_heads) for b in range(a + 1, n_heads)]
        assert torch.allclose(got[seed], torch.cat(expected), atol=1e-10)
    spec = next(s for s in load_specs(SHIPPED) if s.claim == "C1")
    stats = suite_computed_statistics(spec, str(root), 0, None)
    per_seed = [cosine_summary(c)["in_band"] for c in checkpoint_query_cosines(str(root), 0, None).values()]
    assert stats["init_band"].n == 2 and stats["init_band"].mean == pytest.approx(np.mean(per_seed))
    assert stats["random_band"].n == 10  # needs no model: the spec's seeds, as at the other scales


# ---- the whole path on the local tiny suite -------------------------------------------------------

@pytest.mark.slow
def test_make_reproduce_suites_runs_the_tiny_suite_end_to_end(tmp_path):
    """The documented tiny suite, measured and aggregated by the runner, then the five claims read from
    it under committed specs: where no role formed the report says 'not testable at this scale'; a
    second call measures nothing."""
    from headlab.lit.hf_lm import build_tiny_suite

    suite = build_tiny_suite(tmp_path / "tiny-suite", (0, 1), 64, log=lambda line: None)
    specs = tmp_path / "repo" / "specs"
    specs.mkdir(parents=True)
    for path in SHIPPED.glob("c*.yaml"):
        if load_spec(path).claim in SUITE_CLAIMS:
            shutil.copy(path, specs / path.name)
    git = ["git", "-C", str(tmp_path / "repo"), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "specs"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    root = tmp_path / "logs" / "sweeps"
    cmd = [sys.executable, "-m", "headlab.cli.reproduce", "run=true", "scale=suites", f"use_suite={suite}",
           f"specs={specs}", f"sweeps_root={root}", "override=['data.probe_size=32','lm.probe_size=16']"]
    first = subprocess.run([*cmd, f"out={tmp_path / 'r1'}"], capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stdout + first.stderr
    folder = root / "tiny-suite-en_news" / "reproduce"  # the spec's polypythia-70m-en_news, named after this suite
    assert (folder / "aggregate" / "sweep_heads.csv").is_file() and (folder.parent / "reproduce-freeze.json").is_file()
    report = pd.read_csv(tmp_path / "r1" / "claims.csv", keep_default_na=False).set_index("claim")
    # no head of this 64-step, 2-layer suite takes an LM role: the claims about roles are not testable
    for claim in ("C2", "C4", "C14"):
        assert report.loc[claim, "verdict"] == NOT_TESTABLE, report.loc[claim, "reason"]
        assert report.loc[claim, "scale"].startswith("pretrained suite tiny-suite: gpt_neox 2 layers x 64, 4 heads")
    assert report.loc["C14", "provenance"].endswith("selection keys dropped (one training run per seed): optim, optim.lr")
    assert report.loc["C1", "scale"].endswith("the step-0 checkpoints, 2 seeds")
    assert "init_band = " in report.loc["C1", "statistics"] and "(n=2)" in report.loc["C1", "statistics"]
    assert report.loc["C17", "verdict"] == NOT_MEASURED and "layer=[3, 4, 5]" in report.loc["C17", "reason"]
    assert "not testable at this scale" in (tmp_path / "r1" / "claims.md").read_text()
    second = subprocess.run([*cmd, f"out={tmp_path / 'r2'}"], capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stdout + second.stderr
    assert " skipped  suite tiny-suite-en_news" in second.stdout
