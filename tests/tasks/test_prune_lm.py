"""headlab-prune and headlab-importance on a real tiny induction-LM run: the intact network's scores are
the LM module's own test metrics (computed by Lightning, not by the scoring code), and the pruned
checkpoint it writes loads back to the accuracy the report records."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from headlab.cli.importance import main as importance_main
from headlab.cli.prune import main as prune_main
from headlab.model.lm import HeadlabLM
from headlab.reload import build_datamodule, load_network, run_config
from headlab.store import RunDir
from tests._runs import compose_train_config, train_keeping_threads

pytestmark = pytest.mark.usefixtures("one_thread")

TINY_LM = ["experiment=induction", "trainer.max_steps=8", "data.n_train=256", "data.n_eval=64", "data.probe_size=8",
           "callbacks.lm_metrics.every_n_steps=4", "trainer.enable_model_summary=false", "threads=1",
           "trainer.val_check_interval=4", "model.n_heads=2"]


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("prune_lm") / "run"
    train_keeping_threads(compose_train_config(run, TINY_LM))
    return run


def _test_accuracy(net, datamodule) -> float:
    """Next-token accuracy on the test split without headlab's scoring code: every position, as the LM trains."""
    right = total = 0
    with torch.no_grad():
        for batch in datamodule.test_dataloader():
            ids = batch["input_ids"]
            right += int((net.eval()(ids).logits[:, :-1].argmax(-1) == ids[:, 1:]).sum())
            total += ids[:, 1:].numel()
    return right / total


def test_prune_reads_an_lm_as_its_module_does_and_its_checkpoint_loads_back(lm_run, capsys):
    assert prune_main([str(lm_run), "prune.checkpoint=best", "prune.selection=val_half", "prune.max_drop=1.0",
                       "prune.speedup_rounds=3", "prune.figures=false", "prune.threads=1"]) == 0
    assert "removed 2 of 4 heads" in capsys.readouterr().out  # a drop of 1.0 never stops it: one head per layer left
    report = json.loads((lm_run / "prune.json").read_text())["ablation-valhalf-ft0"]
    summary = json.loads((lm_run / "summary.json").read_text())
    assert report["test_acc"][0] == pytest.approx(summary["test_acc"], abs=1e-6)  # Lightning's test/acc, best ckpt
    pruned = load_network(lm_run / report["pruned_checkpoint"])
    assert isinstance(pruned, HeadlabLM) and pruned.heads_per_layer == [1, 1]
    datamodule = build_datamodule(run_config(RunDir(lm_run)))
    assert report["test_acc"][1] == pytest.approx(_test_accuracy(pruned, datamodule), abs=1e-9)
    assert report["fraction_heads_pruned"] == 0.5 and report["speedup"]["batch_64"] > 0


def test_importance_ranks_lm_heads_and_names_their_lm_roles(lm_run):
    assert importance_main([str(lm_run), "importance.figures=false", "importance.threads=1"]) == 0
    heads = pd.read_parquet(lm_run / "head_importance.parquet")
    last = heads[heads["step"] == heads["step"].max()]
    assert len(last[["layer", "head"]].drop_duplicates()) == 4 and "ablation_dloss" in set(last["metric"])
    report = json.loads((lm_run / "importance.json").read_text())
    last = report["checkpoints"][-1]
    assert last["base"]["f1"] is None and 0 <= last["base"]["acc"] <= 1
    assert all(role in {"previous", "duplicate", "induction", "other"} for layer in last["roles"] for role in layer)
    assert last["task_roles"] is None  # an LM has no decision query
