"""The report files, and index.html as a browser renders it (headless Chromium through playwright)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from headlab.reproduce.evidence import evaluate_claim
from headlab.reproduce.spec import load_specs
from tests.reproduce.recorded import record_jobs
from tests.reproduce.test_verdicts import SPECS, heads_runs

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


def _figure(path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [0, 1])
    fig.savefig(path)
    plt.close(fig)
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """Every shipped claim: C1 computed, C8 from one hand-made lm-heads sweep (the 2/4/8-head LM sweep
    C2, C8 and C16 share) with a figure, the others not measured (no sweep on disk; C2 finds no
    sweep_heads.csv in it, C16 no 2-head rows)."""
    root = tmp_path_factory.mktemp("sweeps")
    aggregate = root / "lm-heads" / "2026-11-30_12-00-00_000000" / "aggregate"
    aggregate.mkdir(parents=True)
    from headlab.reproduce.spec import load_spec

    record_jobs(aggregate.parent, load_spec(SPECS / "c08_heads.yaml"))
    heads_runs([0.31, 0.31, 0.32], [0.28, 0.279, 0.291]).to_csv(aggregate / "sweep_runs.csv", index=False)
    _figure(aggregate / "figures" / "accuracy_vs_factor.png")
    from headlab.reproduce.multiplicity import control
    from headlab.reproduce.report import write_report

    results = control([evaluate_claim(s, root) for s in load_specs(SPECS)])
    out = tmp_path_factory.mktemp("report")
    return results, out, write_report(results, out, scale="quick")


def test_claims_csv_has_one_row_per_claim_with_its_verdict_and_statistic(report):
    results, out, written = report
    table = pd.read_csv(out / "claims.csv", keep_default_na=False)
    assert list(table["claim"]) == [f"C{i}" for i in range(1, 19)]
    rows = table.set_index("claim")
    assert rows.loc["C1", "verdict"] == "direction only" and rows.loc["C8", "verdict"] == "supported"
    # mean and t-interval of 0.03, 0.031, 0.029; the prerequisite's statistic (0.31, 0.31, 0.32) is secondary
    assert rows.loc["C8", "statistics"] == "gap = 0.03 [0.0275, 0.0325] (n=3) (primary); acc8 = 0.313 [0.299, 0.328] (n=3) (secondary)"
    assert rows.loc["C8", "primary"] == "gap" and rows.loc["C8", "margin"] == "greater 0.015"
    assert rows.loc["C8", "seeds"] == "0,1,2 (exploratory)" and "grid checked against the spec" in rows.loc["C8", "provenance"]
    # two claims in the Holm family (C1 and C8), each with its five one-sided nulls: Holm over all ten
    from statsmodels.stats.multitest import multipletests

    by = {r.spec.claim: r for r in results}
    nulls = [(c, n, p) for c in ("C1", "C8") for n, p in by[c].tests.items()]
    assert len(nulls) == 10
    adjusted = dict(zip([(c, n) for c, n, _ in nulls], multipletests([p for *_, p in nulls], method="holm")[1]))
    assert float(rows.loc["C8", "p_holm"]) == pytest.approx(adjusted["C8", "above"])  # supported rests on "above"
    assert float(rows.loc["C1", "p_holm"]) == pytest.approx(max(adjusted["C1", "below"], adjusted["C1", "sign"]))
    assert rows.loc["C8", "figure"] == "figures/c8_accuracy_vs_factor.png"
    assert rows.loc["C8", "coverage"] == "6 of 7 jobs usable" and rows.loc["C1", "coverage"] == ""
    assert rows.loc["C10", "verdict"] == "not measured" and "prune" in rows.loc["C10", "reason"]
    # C15 (version 4) reads its own synthetic sweep, not the reviews': none on disk
    assert rows.loc["C15", "verdict"] == "not measured" and "heads-synthetic-cls" in rows.loc["C15", "reason"]
    assert (out / "figures" / "c8_accuracy_vs_factor.png").is_file()


def test_claims_md_quotes_the_article_and_links_the_figure(report):
    results, out, _ = report
    md = (out / "claims.md").read_text(encoding="utf-8")
    assert md.split("\n## ")[0].count("\n| C") == 18
    assert "> 固定总参数量大致不变" in md and "![C8](figures/c8_accuracy_vs_factor.png)" in md
    assert "**Verdict: supported**" in md and "exploratory" in md.splitlines()[0]
    assert "Multiplicity: Holm over every one-sided null the claims' verdicts rest on" in md
    assert "- decided on seeds 0,1,2 (exploratory); rules version 6, frozen 2026-12-04" in md  # C8 v6
    # the scale its hand-made jobs record (the quick grid: 2/4/8 heads, seeds 1900-1901; no model size, no
    # data name), and a verdict on an unfinished sweep says so
    assert "| C8 | 5.1 | supported at heads 2/4/8, 2 seeds (6 of 7 jobs usable) |" in md


@pytest.mark.skipif(BROWSER is None, reason="no chromium on PATH: apt-get install chromium (docs/reproduce.md#ci)")
def test_index_html_renders_in_headless_chromium_with_every_figure_loaded(report):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed: pip install -e '.[browser]'")
    results, out, _ = report
    with sync_api.sync_playwright() as p:
        # as root (CI) Chromium needs --no-sandbox; the rest keeps it off a closed network
        browser = p.chromium.launch(executable_path=BROWSER, args=[
            "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            page = browser.new_page()
            page.goto((out / "index.html").resolve().as_uri())
            page.wait_for_load_state("load")
            widths = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)")
            rows = page.eval_on_selector_all("#summary tbody tr", "rows => rows.map(r => r.cells[0].innerText)")
            quote = page.inner_text("#C8 blockquote p[lang=zh]")
        finally:
            browser.close()
    assert len(widths) == 2 and widths[1] == 200  # C8's hand-made figure (2 in x 100 dpi), decoded from its data URI
    assert widths[0] > 0  # C1's angle histogram, drawn when the report was made
    assert rows == [f"C{i}" for i in range(1, 19)]
    assert quote.startswith("固定总参数量大致不变")
