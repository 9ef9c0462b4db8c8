"""A language-model run's page: its scores as layer x head maps on a fixed 0-1 scale and over all steps,
onset / loss-drop ticks from summary.json, the rLLC curves of headlab-llc, and a run-level row (layer -1)
kept out of the heads; (slow) maps and token view taken from the run's checkpoints, and the page as
headless Chromium renders it, from its dumped DOM."""

from __future__ import annotations

import json
import shutil
import subprocess

import pandas as pd
import pytest

from headlab.view.run_data import run_page_data

STEPS = (0, 100, 200)
LM = {"induction_onset_steps": {"L0H0": None, "L0H1": None, "L1H0": 100, "L1H1": None},
      "loss_drop_step": 150, "icl_jump_step": 200, "final_roles": [["previous", "other"], ["induction", "other"]]}


def lm_table() -> pd.DataFrame:
    """2 layers x 2 heads; L1H0's induction score rises 0.02 -> 0.9, L0H0's previous-token score is 0.6."""
    rows = []
    for t, step in enumerate(STEPS):
        for layer in (0, 1):
            for head in (0, 1):
                rows.append((step, layer, head, "induction_score", [0.02, 0.4, 0.9][t] if (layer, head) == (1, 0) else 0.03))
                rows.append((step, layer, head, "prev_token_score", 0.6 if (layer, head) == (0, 0) else 0.05))
                if step != 100:
                    rows.append((step, layer, head, "rllc", 0.1 * (1 + t) * (1 + layer)))
    rows.append((200, -1, -1, "llc", 17.5))  # a whole-model row: no head's
    return pd.DataFrame(rows, columns=["step", "layer", "head", "metric", "value"]).assign(run_id="r", epoch=0)


def test_lm_panel_data_scores_onsets_and_roles():
    data = run_page_data(lm_table(), lm=LM)
    assert (data["n_layers"], data["n_heads"]) == (2, 2) and "llc" not in data["metrics"]
    assert data["lm"] == {"scores": ["prev_token_score", "induction_score"], "onsets": {"2": 100}, "loss_drop_step": 150,
                          "icl_jump_step": 200, "final_roles": ["previous", "other", "induction", "other"]}
    assert [row[2] for row in data["metrics"]["induction_score"]] == [0.02, 0.4, 0.9]  # L1H0 is head index 2
    assert data["metrics"]["rllc"][1] == [None] * 4 and data["metrics"]["rllc"][2] == [0.3, 0.3, 0.6, 0.6]


def test_rllc_at_a_step_no_measurement_fell_on_is_left_out_and_said():
    table = lm_table()
    extra = table[(table["metric"] == "rllc") & (table["step"] == 200)].assign(step=250)
    data = run_page_data(pd.concat([table, extra]), lm=LM)
    assert data["steps"] == list(STEPS)
    assert data["notes"] == ["rLLC at steps 250 not shown: no measurement at those steps"]


def test_a_run_without_lm_scores_has_no_lm_panel():
    table = lm_table()
    data = run_page_data(table[~table["metric"].isin(["induction_score", "prev_token_score"])], lm=LM)
    assert data["lm"] is None


@pytest.mark.slow  # a headless Chromium start, ~3 s
def test_the_lm_panel_in_chromium(tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium on PATH: apt-get install chromium (make browser-deps)")
    from headlab.view.page import render_page

    page = tmp_path / "view.html"
    page.write_text(render_page(run_page_data(lm_table(), lm=LM, title="lm")), encoding="utf-8")
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    dom = done.stdout
    assert 'data-metric="induction_score"' in dom and 'data-metric="prev_token_score"' in dom, dom[-2000:]
    # the map at the last step (the slider starts there): L1H0's 0.9 drawn on the fixed scale, named on hover
    assert 'title="L1H0 induction_score at step 200: 0.900"' in dom
    assert 'title="step 100: induction onset of L1H0"' in dom and 'title="step 150: the probe loss drops"' in dom
    assert "L1H0 induction (final)" in dom and 'id="rllc"' in dom
    assert "L1H1, step 200: 0.600" in dom  # an rLLC point names its head
    # the selected head's charts: a share of attention on 0-1, rLLC on the range of every head (0.1 .. 0.6),
    # not this head's own (L0H0: 0.1 .. 0.3); step labels under the x axis
    assert 'data-metric="induction_score" data-lo="0" data-hi="1"' in dom
    assert 'data-metric="rllc" data-lo="0.1" data-hi="0.6"' in dom
    assert '>step 0</text>' in dom and '>200</text>' in dom
    json.loads(dom[dom.index('type="application/json">') + len('type="application/json">'):dom.index("</script>")])


@pytest.mark.slow  # a headless Chromium start, ~3 s
def test_a_sweeps_divergence_charts_share_one_y_range(tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium on PATH: apt-get install chromium (make browser-deps)")
    from headlab.view.page import render_page

    configs = [{"label": "a", "n_seeds": 2, "steps": [0, 10], "mean": [0.1, 0.2], "lo": [0.05, 0.15], "hi": [0.15, 0.25], "grid": None},
               {"label": "b", "n_seeds": 2, "steps": [0, 10], "mean": [0.5, 0.6], "lo": [0.4, 0.55], "hi": [0.6, 0.7], "grid": None}]
    page = tmp_path / "view.html"
    page.write_text(render_page({"kind": "sweep", "title": "s", "notes": [], "configs": configs}), encoding="utf-8")
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    assert 'data-metric="a (2 seeds)" data-lo="0.05" data-hi="0.7"' in dom
    assert 'data-metric="b (2 seeds)" data-lo="0.05" data-hi="0.7"' in dom


@pytest.mark.slow  # trains a 4-step LM: ~7 s on 2 shared cores
def test_an_lm_runs_maps_and_token_view_come_from_its_checkpoints(tmp_path, one_thread):
    """The LM measurement stores no patterns: the page takes them from each saved checkpoint on the standard
    repeated-tokens probe. Sentence s of head (l, h) at a step is that checkpoint's own attention on probe
    row s (the permutation [batch, layer, head] -> [layer, head, sentence] is where this could go wrong)."""
    import numpy as np
    import torch

    from headlab.reload import build_datamodule, load_network, run_config
    from headlab.store import RunDir
    from headlab.view.load import checkpoint_patterns, read_run
    from tests._runs import compose_train_config, train_keeping_threads

    run = tmp_path / "run"
    train_keeping_threads(compose_train_config(run, [
        "experiment=induction", "model.n_heads=2", "trainer.max_steps=4", "data.n_train=128", "data.n_eval=32",
        "data.probe_size=8", "callbacks.lm_metrics.every_n_steps=2", "callbacks.lm_metrics.figures=false",
        "callbacks.lm_metrics.standard_probe_size=8", "trainer.enable_model_summary=false",
        "+callbacks.checkpoint.keep_every_n_train_steps=2", "threads=1"]))
    parts = checkpoint_patterns(RunDir(run), sentences=3, mean_over=5)
    assert [int(p["step"]) for p in parts] == [2, 4]
    probe = build_datamodule(run_config(RunDir(run))).repeated_probe(5)
    net = load_network(run / "checkpoints" / "step000002.ckpt")
    with torch.no_grad():
        own = net(probe, return_patterns=True).patterns  # [layer] of [batch, head, q, k]
    first = parts[0]
    assert first["patterns"].shape == (2, 2, 3, probe.size(1), probe.size(1))
    for layer in (0, 1):
        for head in (0, 1):
            for s in range(3):
                np.testing.assert_allclose(first["patterns"][layer, head, s], own[layer][s, head].numpy(), atol=1e-3)
            np.testing.assert_allclose(first["mean_pattern"][layer, head], own[layer][:, head].mean(0).numpy(), atol=1e-6)
    assert first["tokens"][1].tolist() == [str(int(t)) for t in probe[1]]
    data = read_run(RunDir(run))
    assert data["maps"]["steps"] == [2, 4] and data["tokens"]["steps"] == [2, 4]
    assert any(n.startswith("attention maps and token view computed by headlab-view from the run's 2 saved") for n in data["notes"])
