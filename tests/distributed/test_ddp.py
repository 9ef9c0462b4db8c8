"""Two CPU processes under Lightning DDP (gloo) write ONE clean run contract.

Rank zero measures the probe through the unwrapped network while the other rank waits; only rank
zero writes tables, the summary and the figures. The measured metrics equal a single-process
measurement of the same (final) weights, so DDP changes where a number is computed, not the number.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from headlab.store import read_table
from tests._runs import run_cli

pytestmark = pytest.mark.slow

DDP = [
    "data=synthetic", "data.synthetic.n=800", "data.probe_size=32", "data.batch_size=32",
    "model.d_model=32", "model.n_heads=2", "model.n_layers=2", "model.dropout=0.0",
    "trainer.max_epochs=2", "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false",
    "callbacks.progress_bar=null", "callbacks.head_metrics.every_n_steps=4", "callbacks.head_metrics.early_steps=8",
    "callbacks.head_metrics.early_spacing=linear", "callbacks.head_metrics.figures=false", "threads=1",
    "trainer.strategy=ddp", "trainer.devices=2", "trainer.accelerator=cpu",
    "optim=adamw_constant",  # a schedule that does not depend on max_epochs, so a run can be extended on resume
]
KEYS = ["step", "layer", "head", "metric"]


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("ddp")
    run = tmp / "run"
    result = run_cli(tmp, *DDP, f"hydra.run.dir={run}", timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip().splitlines()[-1] == str(run)
    return run


def test_one_summary_from_a_completed_run(ddp_run: Path) -> None:
    summary = json.loads((ddp_run / "summary.json").read_text())
    assert summary["status"] == "completed"
    # 640 train examples / 32 = 20 batches, 10 per rank per epoch: each optimiser step took 2 batches
    assert summary["global_step"] == 20
    assert summary.get("world_size") == 2


def test_head_metrics_written_once_per_measurement(ddp_run: Path) -> None:
    table = read_table(ddp_run / "head_metrics.parquet")
    assert not table.duplicated(KEYS).any()
    assert sorted(table["step"].unique()) == [0, 4, 8, 10, 20]  # early cadence + the two epoch ends
    pairs = read_table(ddp_run / "head_pairs.parquet")
    assert not pairs.duplicated(["step", "layer", "head_a", "head_b", "metric"]).any()
    assert sorted(pairs["step"].unique()) == [0, 4, 8, 10, 20]


def test_only_rank_zero_leaves_files(ddp_run: Path) -> None:
    names = {p.name for p in ddp_run.iterdir()}
    assert {"summary.json", "head_metrics.parquet", "head_pairs.parquet", "metrics.csv", "checkpoints", ".hydra"} <= names
    logs = sorted(p.name for p in ddp_run.glob("*.log"))
    assert "train.log" in logs  # rank zero's; another rank's log, if any, is named after it
    assert not (ddp_run.parent / "logs").exists() or not any((ddp_run.parent / "logs").rglob("summary.json"))


def test_metrics_equal_a_single_process_measurement_of_the_same_weights(ddp_run: Path) -> None:
    from tests.distributed.single_process import measure_checkpoint

    table = read_table(ddp_run / "head_metrics.parquet")
    final = table[table["step"] == 20]
    expected = measure_checkpoint(ddp_run / "checkpoints" / "last.ckpt", DDP)
    compared = 0
    for (layer, head, metric), value in expected.items():
        row = final[(final["layer"] == layer) & (final["head"] == head) & (final["metric"] == metric)]
        assert len(row) == 1, (layer, head, metric)
        np.testing.assert_allclose(row["value"].iloc[0], value, rtol=1e-5, atol=1e-6, err_msg=f"L{layer}H{head} {metric}")
        compared += 1
    assert compared >= 2 * 2 * 10


def test_a_resumed_ddp_run_ends_like_an_uninterrupted_one(ddp_run: Path, tmp_path: Path) -> None:
    """Each rank's loader position is the same count of its own shard, so the checkpoint rank zero
    writes resumes every rank: one epoch, then resume to two, equals the two-epoch run."""
    run = tmp_path / "run"
    first = [o for o in DDP if not o.startswith("trainer.max_epochs")] + ["trainer.max_epochs=1", f"hydra.run.dir={run}"]
    assert run_cli(tmp_path, *first, timeout=900).returncode == 0
    second = run_cli(tmp_path, *DDP, f"hydra.run.dir={run}", "resume=true", timeout=900)
    assert second.returncode == 0, second.stderr[-3000:]
    resumed, reference = (json.loads((d / "summary.json").read_text()) for d in (run, ddp_run))
    assert resumed["resumed_from"]["step"] == 10 and resumed["global_step"] == reference["global_step"] == 20
    for key in ("val_acc", "val_f1", "val_loss", "test_acc", "test_f1"):
        assert resumed[key] == pytest.approx(reference[key], abs=1e-6), key
    ours, theirs = (read_table(d / "head_metrics.parquet").sort_values(KEYS).reset_index(drop=True) for d in (run, ddp_run))
    assert ours[KEYS].equals(theirs[KEYS])
    np.testing.assert_allclose(ours["value"], theirs["value"], rtol=1e-5, atol=1e-6)
