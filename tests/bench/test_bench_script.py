"""`scripts/bench.py --quick` runs end to end and prints its tables (its speed is not checked here)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_quick_runs_and_prints_its_tables(tmp_path):
    out = tmp_path / "bench.json"
    env = {**os.environ, "MPLCONFIGDIR": str(tmp_path / "mpl"), "HEADLAB_LOG_DIR": str(tmp_path / "logs")}
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "bench.py"), "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=1800, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout
    for heading in ("## Training step", "## Profile of one headlab", "## torch.compile", "## Measurement overhead",
                    "## Probe memory", "## Sweep throughput"):
        assert heading in text, f"missing {heading!r} in:\n{text}"
    assert "| headlab (fast path) |" in text and "| torch nn.TransformerEncoder |" in text
    assert "fraction of matmul peak" in text
    assert "One probe measurement" in text and "streaming:" in text
    import json

    result = json.loads(out.read_text())
    names = [c["name"] for c in result["train"]["candidates"]]
    assert names[:3] == ["headlab (fast path)", "headlab (weight path)", "torch nn.TransformerEncoder"]
    assert all(c["ms_median"] > 0 for c in result["train"]["candidates"])
    assert result["overhead"]["on"]["n_measurements"] >= 2
    assert result["memory"]["rows"] and all(r["peak_mb"] > 0 for r in result["memory"]["rows"])
