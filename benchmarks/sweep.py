"""Section ``sweep``: jobs per minute of the `smoke` sweep, basic launcher vs joblib `n_jobs=2`."""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.fresh import REPO
from benchmarks.report import table
from headlab.store import RunDir
from headlab.store.run_dir import SUMMARY

LAUNCHERS = (("basic", []), ("joblib n_jobs=2", ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]))


def skip_reason(args: argparse.Namespace) -> str | None:
    if args.quick:
        return "--quick (a sweep takes minutes)"
    if importlib.util.find_spec("hydra_plugins.hydra_joblib_launcher") is None:
        return "hydra-joblib-launcher is not installed (`pip install -e '.[launchers]'`)"
    return None


def run_sweep(launcher_overrides: list[str], threads: int) -> dict[str, Any]:
    """`headlab-train -m sweep=smoke` into a fresh log dir: wall time, jobs, completed jobs, exit status."""
    log_dir = tempfile.mkdtemp(prefix="headlab-bench-sweep-")
    env = {**os.environ, "HEADLAB_LOG_DIR": log_dir, "OMP_NUM_THREADS": str(threads)}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "headlab.cli.train", "-m", "sweep=smoke", *launcher_overrides],
                          capture_output=True, text=True, env=env, cwd=REPO)
    wall = time.perf_counter() - t0
    summaries = [RunDir(p.parent).summary for p in Path(log_dir).rglob(SUMMARY)]
    if proc.returncode != 0:
        print(f"sweep {' '.join(launcher_overrides) or 'basic'} failed (rc {proc.returncode}): {proc.stderr[-1500:]}")
    return {"wall_s": wall, "jobs": len(summaries), "completed": sum(s.get("status") == "completed" for s in summaries),
            "rc": proc.returncode}


def section(args: argparse.Namespace, out: dict[str, Any]) -> None:
    reason = skip_reason(args)
    if reason:
        print(f"\n## Sweep throughput\n\nskipped: {reason}")
        out["sweep"] = {"skipped": reason}
        return
    results = {name: run_sweep(extra, args.threads) for name, extra in LAUNCHERS}
    rows = [[name, r["wall_s"], r["jobs"], r["completed"], 60 * r["completed"] / r["wall_s"]] for name, r in results.items()]
    print("\n## Sweep throughput (`headlab-train -m sweep=smoke`)\n")
    print(table(["launcher", "wall s", "jobs", "completed", "jobs/min"], rows))
    print(f"\n- joblib n_jobs=2 vs basic: {results['basic']['wall_s'] / results['joblib n_jobs=2']['wall_s']:.2f}x")
    out["sweep"] = results
