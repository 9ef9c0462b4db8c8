"""Ablation and gradient importance on a model whose one label-carrying head is known."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torchmetrics.functional.classification import multiclass_f1_score

from headlab.interventions import (
    ScoreTally,
    evaluate_gated,
    gradient_importance,
    heads_for_share,
    keep_top_k,
    leave_one_layer_in,
    normalize_layers,
    random_scores,
    rank_heads,
    single_head_ablation,
)

from ._planted import PLANTED, planted_batches, planted_model

@pytest.fixture(scope="module")
def planted():
    return planted_model(), planted_batches()

def test_planted_model_is_perfect_and_ablating_its_head_gives_chance(planted):
    net, batches = planted
    result = single_head_ablation(net, batches)
    assert result.base.acc[0] == 1.0
    assert rank_heads(result.dloss)[0] == PLANTED
    layer, head = PLANTED
    assert result.dacc[layer, head] == pytest.approx(-0.5)  # accuracy 0.5 = chance on balanced labels
    others = torch.ones_like(result.dacc, dtype=torch.bool)
    others[layer, head] = False
    assert torch.all(result.dacc[others] == 0.0)
    assert torch.all(result.dloss[1] == 0.0)  # layer 1 does nothing

def test_batched_ablation_equals_gating_each_head_alone(planted):
    net, batches = planted
    result = single_head_ablation(net, batches, max_rows=70)  # forces several copies-per-pass groups
    base = evaluate_gated(net, batches)
    for layer in range(2):
        for head in range(4):
            gates = torch.ones(2, 4)
            gates[layer, head] = 0.0
            ref = evaluate_gated(net, batches, gates)
            assert float(result.dloss[layer, head]) == pytest.approx(float(ref.loss[0] - base.loss[0]), abs=1e-6)
            assert float(result.df1[layer, head]) == pytest.approx(float(ref.f1[0] - base.f1[0]), abs=1e-9)

def test_gradient_importance_ranks_the_planted_head_first(planted):
    net, batches = planted
    scores = gradient_importance(net, batches)
    assert rank_heads(scores)[0] == PLANTED
    assert torch.all(scores[1] == 0.0)  # zero value weights: no gradient reaches those gates
    assert rank_heads(normalize_layers(scores))[0] == PLANTED

def test_gradient_importance_is_the_mean_over_examples_of_abs_gate_gradient(planted):
    """Reference: one example at a time through the network's own `head_gates` argument."""
    net, batches = planted
    scores = gradient_importance(net, batches[:1])
    batch = batches[0]
    total = torch.zeros(2, 4, dtype=torch.float64)
    for i in range(batch["labels"].numel()):
        gates = torch.ones(2, 4, requires_grad=True)
        logits = net(batch["input_ids"][i : i + 1], batch["attention_mask"][i : i + 1], head_gates=gates).logits
        (grad,) = torch.autograd.grad(F.cross_entropy(logits, batch["labels"][i : i + 1]), gates)
        total += grad.abs().double()
    torch.testing.assert_close(scores, total / batch["labels"].numel(), rtol=1e-5, atol=1e-9)
    assert all(p.grad is None for p in net.parameters())

def test_keep_top_k_and_leave_one_layer_in(planted):
    net, batches = planted
    ablation = single_head_ablation(net, batches).dloss
    curve = keep_top_k(net, batches, ablation, [0, 1, 8])
    assert curve.acc.tolist() == [0.5, 1.0, 1.0]  # the top head alone does the whole task
    layers = leave_one_layer_in(net, batches)
    assert layers.acc.tolist() == [1.0, 0.5]

def test_random_ranking_is_seeded_and_covers_every_head(planted):
    net, _ = planted
    live = torch.ones(2, 4, dtype=torch.bool)
    a, b = random_scores(live, 3), random_scores(live, 4)
    assert sorted(rank_heads(a)) == sorted(rank_heads(b)) == [(l, h) for l in range(2) for h in range(4)]
    assert rank_heads(a) != rank_heads(b)

def test_score_tally_matches_torchmetrics_and_cross_entropy():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 50, 4, generator=g)
    labels = torch.randint(0, 3, (50,), generator=g)  # class 3 never occurs as a label
    tally = ScoreTally(3, 4)
    tally.update(logits[:, :20], labels[:20])
    tally.update(logits[:, 20:], labels[20:])
    scores = tally.compute()
    for v in range(3):
        ref_f1 = multiclass_f1_score(logits[v], labels, num_classes=4, average="macro")
        assert float(scores.f1[v]) == pytest.approx(float(ref_f1), abs=1e-6)
        assert float(scores.loss[v]) == pytest.approx(float(F.cross_entropy(logits[v], labels)), abs=1e-6)
        assert float(scores.acc[v]) == pytest.approx(float((logits[v].argmax(-1) == labels).double().mean()))

def test_heads_for_share_counts_positive_effect_only():
    effect = torch.tensor([[0.5, -1.0], [0.3, 0.2]])
    assert heads_for_share(effect, 0.5) == 1
    assert heads_for_share(effect, 0.51) == 2
    assert heads_for_share(torch.tensor([[float("nan"), -0.1]]), 0.5) == 0
