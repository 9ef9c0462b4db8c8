"""Hand-made multirun folders with known answers (no training).

`make_sweep(tmp_path)` writes 10 jobs of `model.n_heads=2,4` x `seed=0..4` (job = 5 * config + seed):

| jobs | config | what |
|---|---|---|
| 0, 1, 2 | n_heads=2 | completed, val_acc 0.80 / 0.84 / 0.86, roles switch at step 20 |
| 3 | n_heads=2 | missing: no job dir (only in multirun.yaml) |
| 4 | n_heads=2 | still running |
| 5, 6 | n_heads=4 | completed, val_acc 0.70 / 0.76, roles switch at step 10 |
| 7 | n_heads=4 | failed (status "failed" with an error) |
| 8 | n_heads=4 | corrupt head_metrics part (garbage bytes) |
| 9 | n_heads=4 | summary.json is not JSON |

Every completed run: 2 layers, steps 0..40 by 10. Head of type k gets distinct final metrics
and role k % 5 (before the switch: all heads alike, role mixed = 5); each seed permutes the
heads, so cross-seed matching must undo the permutation. cum_grad_norm rises with k, final
entropy_norm falls with k (specificity rises) and dist_from_init falls with k: rho +1 and -1.
Pair tables: js = 0.01 * step and corr = 1 - 0.01 * step off the diagonal; q/qk cosines
alternate +-0.125 at step 0 and +-0.25 after, with d_model = head_dim = 8 (theory 1/8 for both).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

os.environ.setdefault("MPLCONFIGDIR", str(Path(tempfile.gettempdir()) / f"headlab-tests-mplconfig-{os.getuid()}"))

from headlab.store import HEAD_METRICS, HEAD_PAIRS, SweepDir, append_part, head_metric_rows, head_pair_rows  # noqa: E402

STEPS = (0, 10, 20, 30, 40)
VAL_ACC = {0: 0.80, 1: 0.84, 2: 0.86, 5: 0.70, 6: 0.76}
SWITCH = {2: 20, 4: 10}
N_LAYERS = 2

MULTIRUN_YAML = """\
hydra:
  sweeper:
    _target_: hydra._internal.core_plugins.basic_sweeper.BasicSweeper
    max_batch_size: null
    params: null
  overrides:
    task:
    - data=synthetic
    - model.n_heads=2,4
    - seed=0,1,2,3,4
"""


def head_values(k: int, before_switch: bool) -> dict[str, float]:
    """Descriptor and movement metrics of a head of type k."""
    if before_switch:
        return {"entropy_norm": 0.95, "special_attention": 0.05, "prev_score": 0.04, "confidence": 0.1,
                "distance_norm": 1.0, "mean_distance": 8.0, "role": 5.0, "cum_grad_norm": 0.5, "dist_from_init": 0.01}
    return {"entropy_norm": 0.9 - 0.1 * k, "special_attention": 0.05 + 0.1 * k, "prev_score": 0.5 - 0.05 * k,
            "confidence": 0.2 + 0.1 * k, "distance_norm": 0.3 + 0.1 * k, "mean_distance": 1.0 + 2.0 * k,
            "role": float(k % 5), "cum_grad_norm": 1.0 + k, "dist_from_init": 1.0 / (1.0 + k)}


def write_completed_run(job_dir: Path, seed: int, n_heads: int, val_acc: float) -> None:
    types = np.random.default_rng(seed + 100).permutation(n_heads)  # head h is of type types[h]
    for step in STEPS:
        per_head = [head_values(int(k), step < SWITCH[n_heads]) for k in types]
        layer = {m: np.array([v[m] for v in per_head]) for m in per_head[0]}
        append_part(job_dir / HEAD_METRICS, step, head_metric_rows(job_dir.name, step, 0, [layer] * N_LAYERS))
        append_part(job_dir / HEAD_PAIRS, step, head_pair_rows(job_dir.name, step, 0, [pair_matrices(n_heads, step)] * N_LAYERS))
    curve = pd.DataFrame({"step": [9, 19, 29, 39], "val/acc": [0.5, 0.9 * val_acc, 0.96 * val_acc, val_acc],
                          "train/loss": [1.0, 0.8, 0.6, 0.5]})
    curve.to_csv(job_dir / "metrics.csv", index=False)


def pair_matrices(n_heads: int, step: int) -> dict[str, np.ndarray]:
    off = ~np.eye(n_heads, dtype=bool)
    sign = np.where(np.add.outer(np.arange(n_heads), np.arange(n_heads)) % 2 == 0, 1.0, -1.0)
    cosine = np.where(off, sign * (0.125 if step == 0 else 0.25), 1.0)
    return {"js": np.where(off, 0.01 * step, 0.0), "corr": np.where(off, 1.0 - 0.01 * step, 1.0),
            "q_cosine": cosine, "qk_cosine": cosine}


def write_job(sweep_dir: Path, job: int, n_heads: int, seed: int, status: str, **extra) -> Path:
    job_dir = sweep_dir / str(job)
    (job_dir / ".hydra").mkdir(parents=True)
    overrides = ["data=synthetic", f"model.n_heads={n_heads}", f"seed={seed}"]
    (job_dir / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    summary = {"status": status, "run_id": str(job), "head_dim": 8,
               "swept": {"seed": seed, "model.n_heads": n_heads, "model.d_model": 8, "data.source": "synthetic"}, **extra}
    (job_dir / "summary.json").write_text(json.dumps(summary))
    return job_dir


def build_sweep(sweep_dir: Path) -> Path:
    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / "multirun.yaml").write_text(MULTIRUN_YAML)
    for job, acc in VAL_ACC.items():
        n_heads, seed = (2, job) if job < 5 else (4, job - 5)
        job_dir = write_job(sweep_dir, job, n_heads, seed, "completed", val_acc=acc, val_f1=acc - 0.1,
                            test_acc=acc - 0.02, test_f1=acc - 0.12)
        write_completed_run(job_dir, seed, n_heads, acc)
    write_job(sweep_dir, 4, 2, 4, "running")
    write_job(sweep_dir, 7, 4, 2, "failed", error="boom: CUDA out of memory")
    corrupt = write_job(sweep_dir, 8, 4, 3, "completed", val_acc=0.99, test_acc=0.99)
    write_completed_run(corrupt, 3, 4, 0.99)
    next(iter(sorted((corrupt / HEAD_METRICS).glob("part-*.parquet")))).write_bytes(b"\x00garbage, not parquet" * 10)
    bad = write_job(sweep_dir, 9, 4, 4, "completed")
    (bad / "summary.json").write_text('{"status": "completed", "val_acc": 0.9')  # truncated JSON
    return sweep_dir


@pytest.fixture(scope="session")
def _built_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once per session (70 parquet parts); tests get a copy they may change."""
    return build_sweep(tmp_path_factory.mktemp("sweep") / "multirun")


@pytest.fixture
def sweep_dir(_built_sweep: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(_built_sweep, tmp_path / "multirun"))


@pytest.fixture(scope="session")
def aggregated(_built_sweep: Path, tmp_path_factory: pytest.TempPathFactory):
    """(AggregateResult, sweep_summary.csv indexed by config) of the untouched sweep, figures included."""
    from headlab.sweep import aggregate_sweep

    out = tmp_path_factory.mktemp("aggregated")
    result = aggregate_sweep(SweepDir(_built_sweep), out)
    return result, pd.read_csv(out / "sweep_summary.csv").set_index("config")
