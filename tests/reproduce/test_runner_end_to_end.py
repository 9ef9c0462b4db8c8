"""`headlab-reproduce run=true` with the real console scripts on a tiny spec: the sweep trains, the
per-job importance runs, the report reads the result, and a second call trains nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

SPEC = """
claim: C1
version: 1
title: tiny heads sweep
section: "5.1"
article: {zh: 字, en: word}
evidence:
  sweep: heads
  quick:
    sweep_name: tiny-heads
    overrides: ["seed=0,1,2", "model.n_heads=2", data.synthetic.n=600, data.probe_size=32, model.d_model=32,
                trainer.max_epochs=1, trainer.limit_train_batches=5, callbacks.head_metrics.every_n_steps=2]
  full: {sweep_name: tiny-heads-full, overrides: ["seed=0"]}
  per_job:
    - {command: headlab-importance, args: [importance.curves=false, importance.figures=false]}
  table: sweep_runs.csv
statistics:
  acc: {kind: mean, column: test_acc, bounds: [0, 1]}
rule: {supported_if: "acc.ci_low > 0.99", contradicted_if: "acc.ci_high < 0.99"}
"""


@pytest.mark.slow
def test_run_trains_once_measures_each_job_and_reports(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "c01_tiny.yaml").write_text(SPEC, encoding="utf-8")
    root = tmp_path / "logs" / "sweeps"
    cmd = [sys.executable, "-m", "headlab.cli.reproduce", "run=true", f"specs={specs}", f"sweeps_root={root}"]
    first = subprocess.run([*cmd, f"out={tmp_path / 'r1'}"], capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stdout + first.stderr
    folder = root / "tiny-heads" / "reproduce"
    jobs = sorted(p.parent for p in folder.glob("*/summary.json"))
    assert len(jobs) == 3 and all(json.loads((j / "summary.json").read_text())["status"] == "completed" for j in jobs)
    assert all((j / "head_importance.parquet").exists() for j in jobs)
    report = pd.read_csv(tmp_path / "r1" / "claims.csv", keep_default_na=False)
    runs = pd.read_csv(folder / "aggregate" / "sweep_runs.csv")
    assert report.loc[0, "source"] == str(folder / "aggregate" / "sweep_runs.csv")
    assert report.loc[0, "statistics"].startswith(f"acc = {runs['test_acc'].mean():.3g}")
    # the evidence guard read the jobs' configs as headlab-train saved them, and they are the spec's grid
    assert report.loc[0, "provenance"].startswith(f"read {folder} (3 jobs, commit "), report.loc[0, "provenance"]
    checkpoints = {j: (j / "checkpoints" / "last.ckpt").stat().st_mtime_ns for j in jobs}

    second = subprocess.run([*cmd, f"out={tmp_path / 'r2'}"], capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stdout + second.stderr
    assert " skipped  sweep tiny-heads" in second.stdout
    assert {j: (j / "checkpoints" / "last.ckpt").stat().st_mtime_ns for j in jobs} == checkpoints
    assert (tmp_path / "r2" / "claims.csv").read_text() == (tmp_path / "r1" / "claims.csv").read_text()
