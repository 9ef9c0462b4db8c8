"""headlab-prune's measured speed-up: prune.json carries it (ratio of the medians it also writes),
prune.speedup=false writes none, a network with nothing pruned is 1.0 without being timed."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from headlab.cli.prune import main
from headlab.tasks.pruning import measured_speedup
from headlab.model import HeadlabClassifier, ModelConfig
from tests._runs import file_listing, train_keeping_threads

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, compose_tiny):
    run = tmp_path_factory.mktemp("prune_speedup") / "run"
    train_keeping_threads(compose_tiny(run, "callbacks.head_metrics.figures=false", "test=false", "model.n_heads=4",
                                       "threads=1", "data.max_len=24"))
    return run


def test_prune_json_carries_the_measured_speedup_and_false_writes_none(run_copy, capsys):
    assert main([str(run_copy), "prune.ranking=gradient", "prune.fraction_per_step=0.5", "prune.max_drop=1.0",
                 "prune.figures=false", "prune.speedup_rounds=3", "prune.threads=1"]) == 0
    assert "speed-up (unpruned / pruned, median of 3 rounds, seq 24, 1 threads)" in capsys.readouterr().out
    speedup = json.loads((run_copy / "prune.json").read_text())["gradient-ft0"]["speedup"]
    assert {k: speedup[k] for k in ("rounds", "threads", "seq", "device")} == {"rounds": 3, "threads": 1, "seq": 24,
                                                                             "device": "cpu"}
    for batch in (1, 64):
        unpruned_ms, pruned_ms = speedup[f"ms_batch_{batch}"]
        assert unpruned_ms > 0 and pruned_ms > 0
        assert speedup[f"batch_{batch}"] == pytest.approx(unpruned_ms / pruned_ms)

    assert main([str(run_copy), "prune.ranking=random", "prune.fraction_per_step=0.5", "prune.max_drop=1.0",
                 "prune.figures=false", "prune.speedup=false"]) == 0
    report = json.loads((run_copy / "prune.json").read_text())
    assert "speedup" not in report["random-ft0"] and "speedup" in report["gradient-ft0"]  # the other label is kept
    assert "speed-up" not in capsys.readouterr().out


@pytest.mark.parametrize(("arg", "key"), [("prune.speedup=maybe", "prune.speedup"),
                                          ("prune.speedup_rounds=0", "prune.speedup_rounds")])
def test_bad_speedup_settings_are_one_line_exit_2_nothing_written(run_copy, capsys, arg, key):
    before = file_listing(run_copy)
    assert main([str(run_copy), arg]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("headlab-prune: error: invalid config " + key)
    assert file_listing(run_copy) == before


def test_nothing_pruned_is_1_by_definition_and_not_timed(monkeypatch):
    import headlab.interventions.timing as timing

    def never(*args, **kwargs):
        raise AssertionError("timed a network with nothing pruned")

    monkeypatch.setattr(timing, "time_forward", never)
    net = HeadlabClassifier(ModelConfig(vocab_size=30, n_classes=2, max_len=16, d_model=32, dropout=0.0)).eval()
    found = measured_speedup(net, copy.deepcopy(net), seq=100, rounds=30, device="cpu", threads=torch.get_num_threads())
    assert found["batch_1"] == found["batch_64"] == 1.0 and found["rounds"] == 0
    assert found["seq"] == 16  # never longer than the model's positions
    assert found["ms_batch_1"] is None and found["ms_batch_64"] is None
