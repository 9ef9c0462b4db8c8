"""time_forward / measure_speedup: the same inputs to every network, interleaved rounds, and a pruned
network that does far less attention work measured as faster."""

from __future__ import annotations

import copy

import torch
from torch import nn

from headlab.interventions.timing import measure_speedup, time_forward
from headlab.model import HeadlabClassifier, ModelConfig


class Recorder(nn.Module):
    """Records the inputs and the order of its calls in a shared log."""

    def __init__(self, name: str, log: list):
        super().__init__()
        self.name, self.log, self.inputs = name, log, []

    def forward(self, ids, mask):
        self.log.append(self.name)
        self.inputs.append((ids.clone(), mask.clone(), torch.is_inference_mode_enabled(), self.training))
        return ids


def test_every_network_gets_the_same_inputs_in_alternating_order_and_keeps_its_mode():
    log: list[str] = []
    a, b = Recorder("a", log), Recorder("b", log)
    a.train(), b.eval()
    times = time_forward({"a": a, "b": b}, batch=3, seq=7, vocab=50, steps=4, warmup=2)
    assert [len(times["a"]), len(times["b"])] == [4, 4]  # warm-up rounds are not timed
    assert all(t >= 0 for t in times["a"] + times["b"])
    assert log == ["b", "a", "a", "b"] * 3  # each round swaps who goes first
    for (ids_a, mask_a, inference_a, training_a), (ids_b, mask_b, _, training_b) in zip(a.inputs, b.inputs):
        assert ids_a.shape == (3, 7) and torch.equal(ids_a, ids_b) and bool(mask_a.all()) and torch.equal(mask_a, mask_b)
        assert 1 <= int(ids_a.min()) and int(ids_a.max()) < 50  # never the pad id 0
        assert inference_a and not training_a and not training_b  # timed in eval mode, no autograd
    assert a.training and not b.training  # modes restored


def test_a_network_with_most_heads_pruned_is_measured_faster():
    # Wide attention, a narrow MLP: removing 7 of 8 heads removes most of the work.
    config = ModelConfig(vocab_size=100, n_classes=2, max_len=64, n_layers=1, n_heads=8, d_model=512, d_ff=64, dropout=0.0)
    torch.manual_seed(0)
    full = HeadlabClassifier(config).eval()
    pruned = copy.deepcopy(full)
    pruned.prune_heads({0: list(range(7))})
    found = measure_speedup(full, pruned, batch=16, seq=64, vocab=100, steps=7, warmup=1)
    assert found.batch == 16 and found.ratio == found.reference_ms / found.candidate_ms
    assert found.ratio > 1.0, found
