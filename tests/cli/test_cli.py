"""The console script as a user runs it: exit codes, the last line, one-line config errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _run(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HEADLAB_LOG_DIR": str(tmp_path / "logs")}
    return subprocess.run([sys.executable, "-m", "headlab.cli.train", *overrides], capture_output=True, text=True,
                          env=env, timeout=300, cwd=tmp_path)


def test_run_prints_its_run_dir_last_and_writes_there(tmp_path):
    result = _run(tmp_path, "debug=fast", "data=synthetic", "data.synthetic.n=400", "data.probe_size=16",
                  "model.d_model=16", "model.n_heads=2", "callbacks.head_metrics.figures=false")
    assert result.returncode == 0, result.stderr[-2000:]
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    assert run_dir.parent == tmp_path / "logs" / "runs"
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"
    assert (run_dir / ".hydra" / "overrides.yaml").is_file() and (run_dir / "train.log").is_file()
