"""The standalone scripts under scripts/: what they refuse and what they compare."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPTS / script), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the machine has a GPU: the check would run")
def test_gpu_check_without_cuda_runs_nothing_and_exits_2(tmp_path):
    proc = run("gpu_check.py", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "no CUDA device" in proc.stderr
    assert not (tmp_path / "out").exists()


def _digest(folder: Path, files: dict[str, str], printed: dict[str, str]) -> Path:
    folder.mkdir()
    (folder / "digest.json").write_text(json.dumps({"files": files, "printed": {k: {"rc": 0, "stdout": v} for k, v in printed.items()}}))
    return folder


def test_outputs_digest_compare_names_what_differs(tmp_path):
    a = _digest(tmp_path / "a", {"runs/demo/head_metrics.parquet": "1", "x.png": "2"}, {"demo": "ok"})
    b = _digest(tmp_path / "b", {"runs/demo/head_metrics.parquet": "1", "x.png": "3"}, {"demo": "ok"})
    proc = run("outputs_digest.py", "compare", str(a), str(b))
    assert proc.returncode == 1 and "differs: files x.png" in proc.stdout and "files: 1 of 2 identical" in proc.stdout
    assert run("outputs_digest.py", "compare", str(a), str(a)).returncode == 0


def test_outputs_digest_strips_times_and_the_folder_path(tmp_path):
    sys.path.insert(0, str(SCRIPTS))
    try:
        import outputs_digest
    finally:
        sys.path.remove(str(SCRIPTS))
    one, two = tmp_path / "one", tmp_path / "two"
    for folder, wall in ((one, 1.5), (two, 9.0)):
        folder.mkdir()
        (folder / "summary.json").write_text(json.dumps({"val_acc": 0.8, "wall_s": wall, "run_dir": str(folder)}))
    assert outputs_digest._digest(one / "summary.json", one) == outputs_digest._digest(two / "summary.json", two)
    (two / "summary.json").write_text(json.dumps({"val_acc": 0.7, "wall_s": 1.5, "run_dir": str(two)}))
    assert outputs_digest._digest(one / "summary.json", one) != outputs_digest._digest(two / "summary.json", two)


def test_regenerate_figures_refuses_a_run_without_the_figure(tmp_path):
    proc = run("regenerate_figures.py", "--demo", str(tmp_path), "--docs", str(tmp_path / "docs"))
    assert proc.returncode == 2 and "no such figure" in proc.stderr and "attention_grid.png" in proc.stderr
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "attention_grid.png").write_bytes(b"png")
    (tmp_path / "docs").mkdir()
    assert run("regenerate_figures.py", "--demo", str(tmp_path), "--docs", str(tmp_path / "docs")).returncode == 0
    assert (tmp_path / "docs" / "demo_attention_grid.png").read_bytes() == b"png"
