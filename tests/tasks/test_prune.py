"""headlab-prune on a real tiny run: the pruned checkpoint, its size and logits, the refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from headlab.cli.prune import main
from tests._runs import file_listing, train_keeping_threads
from headlab.reload import load_network
from headlab.model.encoder import count_parameters


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, compose_tiny):
    run = tmp_path_factory.mktemp("prune") / "run"
    train_keeping_threads(compose_tiny(run, "callbacks.head_metrics.figures=false", "test=false", "model.n_heads=4", "threads=1"))
    return run


def test_pruned_checkpoint_is_smaller_by_the_removed_slices_and_equals_gating(run_copy):
    assert main([str(run_copy), "prune.ranking=gradient", "prune.fraction_per_step=0.5", "prune.max_drop=1.0"]) == 0
    report = json.loads((run_copy / "prune.json").read_text())["gradient-ft0"]
    pruned = load_network(run_copy / report["pruned_checkpoint"])
    original = load_network(run_copy / "checkpoints" / "last.ckpt")
    assert pruned.heads_per_layer == [1, 1]  # max_drop 1.0: pruned down to one head per layer

    d_model, d_head = original.config.d_model, original.config.head_dim
    per_head = 3 * (d_model * d_head + d_head) + d_head * d_model  # Q, K, V rows + biases, O columns
    n_removed = len(report["heads_removed"])
    assert n_removed == 6
    assert count_parameters(pruned, False) == count_parameters(original, False) - n_removed * per_head
    assert report["n_params"] == [count_parameters(original, False), count_parameters(pruned, False)]

    gates = torch.ones(2, 4)
    for name in report["heads_removed"]:
        layer, head = int(name[1]), int(name[3])
        gates[layer, head] = 0.0
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, original.config.vocab_size, (5, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[0, 7:] = 0
    with torch.no_grad():
        torch.testing.assert_close(pruned(ids, mask).logits, original(ids, mask, head_gates=gates).logits, atol=1e-5, rtol=0)

    curve = pd.read_parquet(run_copy / "prune_curve.parquet")
    assert sorted(curve.prune_step.unique()) == [0, 1, 2]  # 8 heads -> 4 -> 2 (one per layer: nothing left to remove)
    assert (run_copy / "figures" / "prune_curve.png").stat().st_size > 0


def test_stop_at_max_drop_and_curves_per_ranking(run_copy):
    for ranking in ("ablation", "random"):
        assert main([str(run_copy), f"prune.ranking={ranking}", "prune.max_drop=0.0", "prune.figures=false"]) == 0
    curve = pd.read_parquet(run_copy / "prune_curve.parquet")
    assert set(curve.ranking) == {"ablation", "random"}
    for _, rows in curve[curve.metric == "val_acc"].groupby("ranking"):
        base = rows[rows.prune_step == 0].value.item()
        assert (rows[rows.accepted].value >= base).all()  # max_drop 0: no accepted round lost accuracy
        refused = rows[~rows.accepted]
        assert len(refused) <= 1 and (refused.value < base).all()


@pytest.mark.parametrize(("args", "key"), [
    (["prune.fraction_per_step=0"], "prune.fraction_per_step"),
    (["prune.fraction_per_step=1.0"], "prune.fraction_per_step"),
    (["prune.fraction_per_step=1.5"], "prune.fraction_per_step"),
    (["prune.max_drop=-0.01"], "prune.max_drop"),
    (["prune.ranking=leastsquares"], "prune.ranking"),
    (["prune.finetune_steps=-1"], "prune.finetune_steps"),
])
def test_bad_values_are_one_line_exit_2_nothing_written(run_copy, capsys, args, key):
    before = file_listing(run_copy)
    assert main([str(run_copy), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("headlab-prune: error: invalid config " + key)
    assert file_listing(run_copy) == before


def test_fine_tune_changes_weights_but_keeps_the_pruned_shape(run_copy):
    assert main([str(run_copy), "prune.ranking=random", "prune.fraction_per_step=0.5", "prune.max_drop=1.0",
                 "prune.finetune_steps=2", "prune.figures=false"]) == 0
    report = json.loads((run_copy / "prune.json").read_text())["random-ft2"]
    pruned = load_network(run_copy / report["pruned_checkpoint"])
    assert sum(pruned.heads_per_layer) == 8 - len(report["heads_removed"])


def test_the_pruned_checkpoint_records_paths_that_work_from_any_directory(run_copy, tmp_path, monkeypatch):
    import shutil

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))  # benchmarks/ is not installed
    from benchmarks.pruning import load_pair

    monkeypatch.chdir(run_copy.parent)
    assert main([run_copy.name, "prune.ranking=random", "prune.max_drop=1.0", "prune.speedup=false",
                 "prune.figures=false"]) == 0  # a relative run dir, as a user types it
    report = json.loads((run_copy / "prune.json").read_text())["random-ft0"]
    # on the parent commit: "run/checkpoints/last.ckpt", valid only from the folder the command ran in
    assert report["checkpoint"] == "checkpoints/last.ckpt" and report["pruned_checkpoint"] == "pruned/random-ft0.ckpt"
    moved = Path(shutil.move(str(run_copy), str(tmp_path / "elsewhere" / "run")))
    monkeypatch.chdir(tmp_path)
    full, pruned = load_pair(str(moved / report["pruned_checkpoint"]))
    assert sum(full.heads_per_layer) == 8 and sum(pruned.heads_per_layer) < 8
