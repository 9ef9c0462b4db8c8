"""headlab-importance on a real tiny run: the table, the reference values, the refusals."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
import torch

from headlab.cli.importance import main
from tests._runs import file_listing, gated_val_loss, train_keeping_threads
from headlab.reload import load_network
from headlab.store import RunDir


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, compose_tiny):
    run = tmp_path_factory.mktemp("importance") / "run"
    train_keeping_threads(compose_tiny(run, "callbacks.head_metrics.figures=false", "test=false", "threads=1"))
    return run


def test_ablation_rows_equal_a_hand_computed_gated_val_loss(run_copy, capsys):
    assert main([str(run_copy), "importance.figures=false"]) == 0
    table = pd.read_parquet(run_copy / "head_importance.parquet")
    # what it found, in words: the three most important heads (of 4), the largest ablation dloss first
    printed = capsys.readouterr().out.splitlines()
    dloss = table[table.metric == "ablation_dloss"].sort_values("value", ascending=False)
    top = dloss.iloc[0]
    assert printed[-5].startswith(f"{run_copy}: 4 heads") and printed[-1] == f"  ... 1 more: headlab-report {run_copy}"
    assert printed[-4].startswith(f"  L{top.layer}H{top['head']}: from [CLS] ")
    assert f"1st most important of 4 (ablation dloss, step {top.step}: {top.value:.3g})" in printed[-4]
    assert list(table.columns) == ["run_id", "step", "epoch", "layer", "head", "metric", "value"]
    assert {"ablation_dloss", "ablation_dacc", "ablation_df1", "grad_importance", "grad_importance_l2",
            "random_score"} == set(table.metric)
    assert len(table) == 6 * 2 * 2 and table.step.nunique() == 1

    from headlab.reload import build_datamodule, run_config  # the run's own val split, batched as in training

    net = load_network(run_copy / "checkpoints" / "last.ckpt")
    loader = build_datamodule(run_config(RunDir(run_copy))).val_dataloader()

    with torch.no_grad():
        base = gated_val_loss(net, loader, torch.ones(2, 2))
        gates = torch.ones(2, 2)
        gates[1, 0] = 0.0
        expected = gated_val_loss(net, loader, gates) - base
    got = table[(table.metric == "ablation_dloss") & (table.layer == 1) & (table["head"] == 0)].value.item()
    assert got == pytest.approx(expected, abs=1e-5)
    report = json.loads((run_copy / "importance.json").read_text())
    assert report["checkpoints"][0]["base"]["loss"] == pytest.approx(base, abs=1e-5)
    curves = pd.read_parquet(run_copy / "importance_curves.parquet")
    full = curves[(curves.curve == "keep_top_k") & (curves.k == 4) & (curves.metric == "loss")]
    assert full.value.to_numpy() == pytest.approx([base] * 3, abs=1e-5)  # all heads kept = the intact model


def test_all_checkpoints_then_last_keeps_the_other_steps(run_copy):
    assert main([str(run_copy), "checkpoint=all"]) == 0
    steps = sorted(pd.read_parquet(run_copy / "head_importance.parquet").step.unique())
    assert (run_copy / "figures" / "importance.png").stat().st_size > 0
    assert main([str(run_copy), "checkpoint=last", "importance.curves=false", "importance.figures=false"]) == 0
    again = pd.read_parquet(run_copy / "head_importance.parquet")
    assert sorted(again.step.unique()) == steps and not again.duplicated(["step", "layer", "head", "metric"]).any()


def test_redundancy_from_the_runs_pair_table(run_copy):
    """mass 1.0 = threshold ln 2, the largest JS there is: every layer is one cluster of duplicates."""
    assert main([str(run_copy), "importance.redundancy_mass=1.0", "importance.curves=false"]) == 0
    report = json.loads((run_copy / "importance.json").read_text())
    assert report["redundant_heads"] == 2 * (2 - 1)
    # the task roles (from [CLS]) of the last checkpoint, as the training run's own last measurement named them
    summary = json.loads((run_copy / "summary.json").read_text())
    assert report["checkpoints"][-1]["task_queries"] == summary["task_queries"] == "[CLS]"
    assert report["checkpoints"][-1]["task_roles"] == summary["final_task_roles"]
    assert report["redundancy"]["layers"][0]["clusters"] == [[0, 1]]
    assert (run_copy / "figures" / "redundancy.png").stat().st_size > 0
    assert main([str(run_copy), "importance.figures=false"]) == 0  # default: 10% of the mass
    report = json.loads((run_copy / "importance.json").read_text())
    assert report["redundancy"]["js_threshold"] == pytest.approx(0.1 * 0.6931471805599453)


def _break_config(run):
    for config in run.rglob("config.yaml"):
        config.write_text(config.read_text().replace("n_heads: 2", "n_heads: 4"))


def _drop_checkpoints(run):
    shutil.rmtree(run / "checkpoints")


@pytest.mark.parametrize(("damage", "args", "expected"), [
    (None, ["checkpoint=newest"], "checkpoint='newest': expected one of last, best, all"),
    (None, ["checkpoint=newest"], "checkpoint='newest'"),
    (None, ["importance.batch_size=0"], "importance.batch_size"),
    (None, ["importance.bogus=1"], "importance.bogus"),
    (None, ["importance.redundancy_mass=0"], "importance.redundancy_mass"),
    (None, ["importance.device=cuda:7"] if not torch.cuda.is_available() else ["importance.split=train"], "importance."),
    (_drop_checkpoints, [], "has no checkpoints"),
    (_break_config, [], "does not match the run's config"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(run_copy, capsys, damage, args, expected):
    if damage is not None:
        damage(run_copy)
    before = file_listing(run_copy)
    assert main([str(run_copy), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("headlab-importance: error:") and expected in err
    assert file_listing(run_copy) == before


def test_missing_run_dir(tmp_path, capsys):
    assert main([str(tmp_path / "nope")]) == 2
    assert "no such run directory" in capsys.readouterr().err


def test_a_read_only_run_dir_is_refused_in_one_line_before_anything_is_computed(run_copy, capsys, monkeypatch):
    """Root ignores permission bits: the refusal is what a read-only mount answers (EROFS) to a new file."""
    import errno

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    def computed(*args, **kwargs):
        raise AssertionError("computed before the write check")

    before = {p: p.stat().st_mtime_ns for p in run_copy.rglob("*")}
    monkeypatch.setattr("tempfile.mkstemp", read_only)
    monkeypatch.setattr("headlab.reload.build_datamodule", computed)
    assert main([str(run_copy)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"headlab-importance: error: {run_copy}: cannot be written: read-only file system"]
    assert {p: p.stat().st_mtime_ns for p in run_copy.rglob("*")} == before
