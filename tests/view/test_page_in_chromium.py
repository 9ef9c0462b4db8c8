"""The page as a browser runs it (headless Chromium through playwright, as the report's test drives
it; skipped without chromium or playwright: `make browser-deps`), on a hand-made run whose stored
maps, roles and patterns are known, with the network disabled."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from headlab.analysis.roles import ROLES
from headlab.store import RunDir, SweepDir, append_part, head_metric_rows, head_pair_rows
from headlab.store.probe_patterns import write_pattern_part
from headlab.view import write_view

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
STEPS = (0, 8, 32)
LAYERS, HEADS = 2, 2
TOKENS = ["[CLS]", "这", "本", "书", "好", "。"]
ROLE_AT = {0: ["broad", "broad", "mixed", "mixed"], 8: ["local", "broad", "mixed", "vertical"],
           32: ["previous_token", "broad", "mixed", "vertical"]}  # [layer * HEADS + head]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run dir as training writes it: head_metrics/head_pairs parts and probe_patterns/ per step."""
    root = tmp_path_factory.mktemp("run")
    rng = np.random.default_rng(7)
    stored = {}
    for t, step in enumerate(STEPS):
        metrics = [{"entropy": np.array([2.0 - t, 1.5]) + layer, "prev_score": np.array([0.1 * t, 0.2]),
                    "role": np.array([ROLES.index(ROLE_AT[step][layer * HEADS + h]) for h in range(HEADS)], float)}
                   for layer in range(LAYERS)]
        pairs = [{"js": np.array([[0.0, 0.1 * t], [0.1 * t, 0.0]]), "q_cosine": np.array([[1.0, 0.05], [0.05, 1.0]])}
                 for _ in range(LAYERS)]
        append_part(RunDir(root).head_metrics_path, step, head_metric_rows("r", step, 0, metrics))
        append_part(RunDir(root).head_pairs_path, step, head_pair_rows("r", step, 0, pairs))
        mean = rng.dirichlet(np.ones(8), size=(LAYERS, HEADS, 8))
        patterns = np.zeros((LAYERS, HEADS, 2, 6, 6))
        patterns[:, :, 0] = rng.dirichlet(np.ones(6), size=(LAYERS, HEADS, 6))
        patterns[:, :, 1, :4, :4] = rng.dirichlet(np.ones(4), size=(LAYERS, HEADS, 4))
        tokens = np.array([TOKENS, TOKENS[:4] + ["", ""]])
        write_pattern_part(RunDir(root).probe_patterns_dir, step, patterns, np.array([6, 4]), tokens, mean)
        stored[step] = (mean.astype(np.float16).astype(float), patterns.astype(np.float16).astype(float))
    return root, write_view(RunDir(root)), stored


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed: pip install -e '.[browser]'")
    if BROWSER is None:
        pytest.skip("no chromium on PATH: apt-get install chromium (make browser-deps)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=BROWSER, args=[
            "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        yield browser
        browser.close()


def open_offline(browser, html):
    """The page in a context with the network off; (page, console errors, requested URLs)."""
    page = browser.new_context(offline=True).new_page()
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(html.resolve().as_uri())
    page.wait_for_load_state("load")
    return page, errors, requests


@pytest.fixture(scope="module")
def page(browser, run):
    return open_offline(browser, run[1])


def _slide_to(page, index: int) -> None:
    page.focus("#step")
    page.keyboard.press("Home")
    for _ in range(index):
        page.keyboard.press("ArrowRight")


def test_the_slider_shows_each_steps_maps_and_roles(page, run):
    page, errors, _ = page
    _, _, stored = run
    for index in (0, 1, 2):
        _slide_to(page, index)
        step = STEPS[index]
        assert page.inner_text("#step-label").startswith(f"step {step} ")
        for layer in range(LAYERS):
            for head in range(HEADS):
                cell = f"#cell-L{layer}H{head}"
                assert page.inner_text(f"{cell} .cell-title") == f"L{layer}H{head} {ROLE_AT[step][layer * HEADS + head]}"
                shown = np.array(page.eval_on_selector(f"{cell} canvas", "c => Array.from(c._values)")).reshape(8, 8)
                want = stored[step][0][layer, head]
                assert np.abs(shown - want).max() <= want.max() / 510 + 1e-6
    assert errors == []


def test_the_role_change_and_bifurcation_ticks_are_on_the_slider(page):
    page, _, _ = page
    titles = page.eval_on_selector_all("#marks .tick", "ts => ts.map(t => t.className + '|' + t.title)")
    assert titles == ["tick|step 8: L0H0 broad -> local; L1H1 mixed -> vertical",
                      "tick|step 32: L0H0 local -> previous_token",
                      # L0H0 reaches its final role at the last point only: not settled (analysis.bifurcation)
                      "tick bif|step 0: L0H1, L1H0 settle into their final role",
                      "tick bif|step 8: L1H1 settle into their final role"]


def test_clicking_a_head_shows_its_trajectories_over_every_step(page):
    page, errors, _ = page
    _slide_to(page, 1)
    page.click("#cell-L1H0")
    assert page.inner_text("#detail-title").startswith("L1H0")
    points = page.get_attribute("#charts .chart[data-metric=entropy] polyline", "points").split()
    assert len(points) == len(STEPS)
    ys = [float(p.split(",")[1]) for p in points]
    assert ys[0] < ys[1] < ys[2]  # L1H0's entropy 3, 2, 1 falls: SVG's y grows downwards
    roles = page.eval_on_selector_all("#role-timeline span", "s => s.map(x => x.title)")
    assert roles == [f"step {s}: {ROLE_AT[s][2]}" for s in STEPS]
    assert page.eval_on_selector("#charts .chart[data-metric=entropy] line.now", "l => l.getAttribute('x1')") == \
        points[1].split(",")[0]  # the current step marked
    assert errors == []


def test_hovering_a_token_shows_that_heads_weights_at_that_step(page, run):
    page, errors, _ = page
    _, _, stored = run
    _slide_to(page, 2)
    page.click("#cell-L1H1")
    assert page.inner_text("#sentence") .replace(" ", "").replace("\n", "") == "".join(TOKENS)
    page.hover("#sentence .tok[data-i='3']")
    weights = np.array([float(w) for w in page.eval_on_selector_all("#sentence .tok", "s => s.map(x => x.dataset.weight)")])
    matrix = stored[32][1][1, 1, 0]  # quantized by its maximum, shown to 4 decimals
    assert np.abs(weights - matrix[3]).max() <= matrix.max() / 510 + 5e-5
    page.click("button.sent >> nth=1")  # the second sentence: 4 tokens
    page.hover("#sentence .tok[data-i='1']")
    weights = [float(w) for w in page.eval_on_selector_all("#sentence .tok", "s => s.map(x => x.dataset.weight)")]
    matrix = stored[32][1][1, 1, 1, :4, :4]
    assert np.abs(np.array(weights) - matrix[1]).max() <= matrix.max() / 510 + 5e-5
    assert errors == []


def test_nothing_is_fetched_from_the_network(page):
    _, _, requests = page
    assert requests and all(url.startswith("file://") for url in requests)


def test_a_sweeps_page_draws_one_divergence_curve_per_config(browser, tmp_path):
    from tests.sweep.conftest import build_sweep

    sweep = build_sweep(tmp_path / "multirun")
    page, errors, requests = open_offline(browser, write_view(SweepDir(sweep)))
    names = page.eval_on_selector_all("#curves .chart .name", "ns => ns.map(n => n.textContent)")
    assert sorted(names) == ["data=synthetic,model.n_heads=2 (3 seeds)", "data=synthetic,model.n_heads=4 (2 seeds)"]
    assert page.eval_on_selector_all("#curves polygon", "ps => ps.length") == 2  # the seed bands
    assert errors == [] and all(url.startswith("file://") for url in requests)


def test_twelve_heads_a_layer_scroll_inside_the_grid_not_the_page(browser, tmp_path):
    """MiniLM-sized layers (12 heads of maps) used to push the whole page sideways."""
    run = RunDir(tmp_path / "wide")
    for step in (0, 8):
        layer = {"entropy": np.linspace(0.2, 0.9, 12), "role": np.full(12, float(ROLES.index("mixed")))}
        append_part(run.head_metrics_path, step, head_metric_rows("r", step, 0, [layer]))
        mean = np.random.default_rng(step).dirichlet(np.ones(8), size=(1, 12, 8))
        patterns = np.random.default_rng(step + 1).dirichlet(np.ones(6), size=(1, 12, 1, 6))
        write_pattern_part(run.probe_patterns_dir, step, patterns, np.array([6]), np.array([TOKENS]), mean)
    page, errors, _ = open_offline(browser, write_view(run))
    page.set_viewport_size({"width": 1024, "height": 800})
    sizes = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth, "
                          "document.getElementById('grid').scrollWidth, document.getElementById('grid').clientWidth]")
    assert sizes[0] <= sizes[1] and sizes[2] > sizes[3] and not errors, (sizes, errors)
