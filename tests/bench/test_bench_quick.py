"""`python -m benchmarks --quick` end to end: every section's table, and ratios computed from the
numbers it measured (its speed is not checked here)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEADINGS = ("## Training step", "## Profile of one headlab", "## torch.compile", "## Measurement overhead",
            "## Probe memory", "## Sweep throughput", "## Language model")


@pytest.mark.slow
def test_bench_quick_prints_every_section_and_consistent_ratios(tmp_path):
    out = tmp_path / "bench.json"
    env = {**os.environ, "MPLCONFIGDIR": str(tmp_path / "mpl"), "HEADLAB_LOG_DIR": str(tmp_path / "logs")}
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=1800, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout
    for heading in HEADINGS:
        assert heading in text, f"missing {heading!r} in:\n{text}"
    assert "| headlab (fast path) |" in text and "| torch nn.TransformerEncoder |" in text
    assert "One probe measurement" in text and "streaming:" in text
    result = json.loads(out.read_text())

    cands = {c["name"]: c for c in result["train"]["candidates"]}
    assert list(cands)[:3] == ["headlab (fast path)", "headlab (weight path)", "torch nn.TransformerEncoder"]
    fast = cands["headlab (fast path)"]["ms_median"]
    for name, c in cands.items():
        assert c["ms_median"] > 0 and len(c["ms_all"]) == 5
        if not name.startswith("headlab"):
            assert c["headlab_ratio"] == pytest.approx(fast / c["ms_median"])

    o = result["overhead"]
    on, off = o["on"], o["off"]
    assert on["n_measurements"] >= 2 and off["n_measurements"] == 0 and on["steps"] == off["steps"] == 40
    assert o["overhead_fraction"] == pytest.approx((on["fit_s"] - on["figures_s"] - off["fit_s"]) / off["fit_s"])
    assert 0 < on["hooks_s"] < on["fit_s"]

    rows = result["memory"]["rows"]
    assert {(r["mode"], r["size"]) for r in rows} == {(m, n) for m in ("stream", "materialise") for n in (256, 1024)}
    assert all(r["peak_mb"] >= r["rss_before_mb"] > 0 for r in rows)
    stream = {r["size"]: r["extra_mb"] for r in rows if r["mode"] == "stream"}
    assert result["memory"]["flat"] == (stream[1024] <= 1.5 * stream[256])
