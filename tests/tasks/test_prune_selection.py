"""headlab-prune prune.selection=val_half on a real tiny run: validation half A alone ranks the heads and
decides the stop; half B and test are held-out readings, recorded beside today's val selection."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest
import torch
from torch.utils.data import DataLoader, Subset

from headlab.cli.prune import main
from headlab.tasks.pruning import PruneSettings
from headlab.reload import build_datamodule, load_network, run_config
from headlab.tasks import pruning
from headlab.store import RunDir
from tests._runs import file_listing, train_keeping_threads

pytestmark = pytest.mark.usefixtures("one_thread")

# Few rounds (half the remaining heads each), a drop the tiny run can take, nothing timed.
FAST = ["prune.ranking=ablation", "prune.fraction_per_step=0.5", "prune.max_drop=0.05", "prune.speedup=false",
        "prune.figures=false"]
# prune.json's keys before prune.selection existed, and the ones it added
OLD_KEYS = {"checkpoint", "step", "settings", "pruned_checkpoint", "heads_removed", "n_heads", "n_params",
            "fraction_heads_pruned", "fraction_params_pruned", "val_acc", "test_acc"}
NEW_KEYS = {"selection", "test_acc_drop", "heldout_acc", "heldout_acc_drop"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory, compose_tiny):
    run = tmp_path_factory.mktemp("prune_selection") / "run"
    train_keeping_threads(compose_tiny(run, "callbacks.head_metrics.figures=false", "test=false", "model.n_heads=4",
                                       "threads=1"))
    return run


def _examples(dataset, positions):
    """(token ids, label) of the examples at `positions`, as a multiset."""
    return Counter((tuple(int(t) for t in dataset[i][0]), int(dataset[i][1])) for i in positions)


def _batch_examples(batches):
    return Counter((tuple(int(t) for t in ids[mask > 0]), int(label)) for b in batches
                   for ids, mask, label in zip(b["input_ids"], b["attention_mask"], b["labels"]))


@pytest.mark.parametrize("n", [2, 3, 8, 81])
def test_the_halves_are_disjoint_and_cover_the_split(n):
    a, b = pruning.val_halves(n)
    assert not set(a) & set(b) and sorted(a + b) == list(range(n))
    assert (len(a), len(b)) == ((n + 1) // 2, n // 2)
    assert all(i % 2 == 0 for i in a) and all(i % 2 == 1 for i in b)  # even positions: A; odd: B


def test_val_half_batches_are_the_even_and_odd_examples_of_val(trained):
    datamodule = build_datamodule(run_config(RunDir(trained)))
    splits, halves = pruning.eval_splits(datamodule, PruneSettings(selection="val_half"))
    assert list(splits) == ["val_a", "val_b", "test"]
    val = datamodule.val_dataloader().dataset
    n = len(val)
    assert _batch_examples(splits["val_a"]) == _examples(val, range(0, n, 2))
    assert _batch_examples(splits["val_b"]) == _examples(val, range(1, n, 2))
    assert _batch_examples(splits["val_a"]) + _batch_examples(splits["val_b"]) == _examples(val, range(n))
    assert halves["n_a"] + halves["n_b"] == n and halves["n_a"] == (n + 1) // 2
    whole, none = pruning.eval_splits(datamodule, PruneSettings())
    assert list(whole) == ["val", "test"] and none is None  # selection=val: the splits of before


def _settings(**kw) -> PruneSettings:
    return PruneSettings(ranking="ablation", fraction_per_step=0.5, max_drop=0.05, speedup=False, figures=False,
                         threads=1, **kw)


def test_val_half_never_ranks_or_stops_on_half_b_or_test(trained, monkeypatch):
    """The ablation scorer sees half A's examples only; replacing half B and test by flipped labels
    changes their recorded accuracy and nothing the loop decided."""
    import headlab.interventions.pruning as loop

    seen, real_scorer = [], loop.single_head_ablation
    monkeypatch.setattr(loop, "single_head_ablation",
                        lambda net, batches, **kw: (seen.append(_batch_examples(batches)), real_scorer(net, batches, **kw))[1])
    honest = pruning.compute(RunDir(trained), _settings(selection="val_half"))
    n = len(build_datamodule(run_config(RunDir(trained))).val_dataloader().dataset)
    assert len(seen) >= 2 and all(s == seen[0] for s in seen) and sum(seen[0].values()) == (n + 1) // 2

    real_splits = pruning.eval_splits

    def garbage(datamodule, settings):
        splits, halves = real_splits(datamodule, settings)
        flip = lambda batches: [{**b, "labels": 1 - b["labels"]} for b in batches]  # noqa: E731
        return {**splits, "val_b": flip(splits["val_b"]), "test": flip(splits["test"])}, halves

    monkeypatch.setattr(pruning, "eval_splits", garbage)
    spoiled = pruning.compute(RunDir(trained), _settings(selection="val_half"))
    decided = lambda o: [(s.removed, s.accepted, float(s.scores["val_a"].acc[0])) for s in o.result.steps]  # noqa: E731
    assert decided(spoiled) == decided(honest) and spoiled.result.removed == honest.result.removed
    for split in ("val_b", "test"):  # binary labels flipped: accuracy a -> 1 - a, so the record did change
        for h, s in zip(honest.result.steps, spoiled.result.steps):
            assert float(s.scores[split].acc[0]) == pytest.approx(1 - float(h.scores[split].acc[0]))


def _accuracy(net, loader) -> float:
    """Plain accuracy of `net` over `loader`, without headlab's scoring code."""
    right = total = 0
    with torch.no_grad():
        for batch in loader:
            logits = net.eval()(batch["input_ids"], batch["attention_mask"]).logits
            right += int((logits.argmax(-1) == batch["labels"]).sum())
            total += len(batch["labels"])
    return right / total


def test_recorded_drops_equal_an_independent_evaluation_of_the_saved_checkpoints(run_copy, capsys):
    assert main([str(run_copy), *FAST, "prune.selection=val_half", "prune.figures=true"]) == 0
    out = capsys.readouterr().out
    assert "held out: val half B acc" in out and "pruned/ablation-valhalf-ft0.ckpt" in out
    report = json.loads((run_copy / "prune.json").read_text())
    assert list(report) == ["ablation-valhalf-ft0"]
    entry = report["ablation-valhalf-ft0"]
    assert entry["selection"] == "val_half" and entry["settings"]["selection"] == "val_half"
    assert entry["pruned_checkpoint"].endswith("pruned/ablation-valhalf-ft0.ckpt") and entry["heads_removed"]
    # prune.json records paths relative to the run dir
    pruned, unpruned = load_network(run_copy / entry["pruned_checkpoint"]), load_network(run_copy / "checkpoints" / "last.ckpt")
    datamodule = build_datamodule(run_config(RunDir(run_copy)))
    val = datamodule.val_dataloader()
    half = lambda start: DataLoader(Subset(val.dataset, range(start, len(val.dataset), 2)), batch_size=16,  # noqa: E731
                                    collate_fn=val.collate_fn)
    for key, loader in (("test_acc", datamodule.test_dataloader()), ("heldout_acc", half(1)), ("val_acc", half(0))):
        assert entry[key] == pytest.approx([_accuracy(unpruned, loader), _accuracy(pruned, loader)], abs=1e-12), key
    assert entry["test_acc_drop"] == pytest.approx(entry["test_acc"][0] - entry["test_acc"][1], abs=1e-12)
    assert entry["heldout_acc_drop"] == pytest.approx(entry["heldout_acc"][0] - entry["heldout_acc"][1], abs=1e-12)
    assert entry["val_halves"]["n_a"] + entry["val_halves"]["n_b"] == len(val.dataset)

    curve = pd.read_parquet(run_copy / "prune_curve.parquet")
    assert set(curve.selection) == {"val_half"} and "val_acc" not in set(curve.metric)
    last = curve[curve.accepted].prune_step.max()
    final = curve[curve.prune_step == last].set_index("metric").value
    assert final["test_acc_drop"] == pytest.approx(entry["test_acc_drop"])
    assert final["val_b_acc_drop"] == pytest.approx(entry["heldout_acc_drop"])
    assert (run_copy / "figures" / "prune_curve.png").stat().st_size > 0


def test_both_selections_live_in_one_run_dir_and_val_stays_as_before(run_copy):
    assert main([str(run_copy), *FAST]) == 0
    val_report = json.loads((run_copy / "prune.json").read_text())["ablation-ft0"]
    val_curve = pd.read_parquet(run_copy / "prune_curve.parquet")
    assert set(val_report) == OLD_KEYS | NEW_KEYS  # today's entry, plus four keys
    assert val_report["selection"] == "val" and val_report["heldout_acc"] is None and val_report["heldout_acc_drop"] is None
    assert val_report["test_acc_drop"] == pytest.approx(val_report["test_acc"][0] - val_report["test_acc"][1])
    assert set(val_curve.metric) == {f"{s}_{m}" for s in ("val", "test") for m in ("loss", "acc", "f1")}  # today's rows

    assert main([str(run_copy), *FAST, "prune.selection=val_half"]) == 0
    report = json.loads((run_copy / "prune.json").read_text())
    assert sorted(report) == ["ablation-ft0", "ablation-valhalf-ft0"] and report["ablation-ft0"] == val_report
    assert {p.name for p in (run_copy / "pruned").iterdir()} == {"ablation-ft0.ckpt", "ablation-valhalf-ft0.ckpt"}
    curve = pd.read_parquet(run_copy / "prune_curve.parquet")
    pd.testing.assert_frame_equal(curve[curve.selection == "val"].reset_index(drop=True), val_curve)  # kept as it was
    assert main([str(run_copy), *FAST]) == 0  # again: only the val rows are replaced
    again = pd.read_parquet(run_copy / "prune_curve.parquet")
    assert len(again) == len(curve) and (again.selection == "val_half").sum() == (curve.selection == "val_half").sum()


def test_a_curve_from_before_the_setting_reads_as_val(run_copy):
    assert main([str(run_copy), *FAST]) == 0
    path = run_copy / "prune_curve.parquet"
    old = pd.read_parquet(path).drop(columns="selection")
    old.to_parquet(path, index=False)  # as the code before prune.selection wrote it
    assert main([str(run_copy), *FAST, "prune.selection=val_half"]) == 0
    curve = pd.read_parquet(path)
    pd.testing.assert_frame_equal(curve[curve.selection == "val"].drop(columns="selection").reset_index(drop=True), old)


def test_a_bad_selection_is_one_line_naming_the_choices_nothing_written(run_copy, capsys):
    before = file_listing(run_copy)
    assert main([str(run_copy), "prune.selection=test"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("headlab-prune: error: invalid config prune.selection")
    assert "val or val_half" in err
    assert file_listing(run_copy) == before
