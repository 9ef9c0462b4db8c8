"""Iterative pruning on the hand-built model: the label-carrying head survives, the stop rule holds."""

from __future__ import annotations

import pytest
import torch

from headlab.interventions import evaluate_gated
from headlab.interventions.pruning import finetune_steps, iterative_prune, least_important
from headlab.model.encoder import count_parameters

from ._planted import PLANTED, planted_batches, planted_model


def _prune(ranking, max_drop, **kw):
    net = planted_model()
    splits = {"val": planted_batches(), "test": planted_batches(seed=2)}
    return net, splits, iterative_prune(net, splits, ranking=ranking, fraction_per_step=0.3, max_drop=max_drop,
                                        count_parameters=count_parameters, **kw)


def test_ablation_ranking_prunes_everything_but_the_planted_head_without_loss():
    net, splits, result = _prune("ablation", 0.0)
    layer, head = PLANTED
    assert head not in result.removed[layer]
    assert result.net.heads_per_layer == [1, 1]  # every head but one per layer is idle
    assert all(s.accepted and float(s.scores["val"].acc[0]) == 1.0 for s in result.steps)
    assert net.heads_per_layer == [4, 4]  # the argument is untouched


def test_pruned_network_equals_the_gated_original():
    net, splits, result = _prune("random", 1.0)
    gates = torch.ones(2, 4)
    for layer, heads in enumerate(result.removed):
        gates[layer, heads] = 0.0
    batch = splits["val"][0]
    with torch.no_grad():
        pruned = result.net(batch["input_ids"], batch["attention_mask"]).logits
        gated = net(batch["input_ids"], batch["attention_mask"], head_gates=gates).logits
    torch.testing.assert_close(pruned, gated, atol=1e-5, rtol=0)


def test_stop_rule_keeps_the_last_network_within_max_drop():
    """Random order with max_drop 0.1: the planted head's removal (acc 1.0 -> 0.5) must be the refused round."""
    for seed in range(6):
        _, splits, result = _prune("random", 0.1, random_seed=seed)
        accepted = [s for s in result.steps if s.accepted]
        assert all(float(s.scores["val"].acc[0]) >= 0.9 for s in accepted)
        if not result.steps[-1].accepted:
            assert PLANTED in result.steps[-1].removed
            assert float(result.steps[-1].scores["val"].acc[0]) == 0.5
        assert float(evaluate_gated(result.net, splits["val"]).acc[0]) == float(accepted[-1].scores["val"].acc[0])


def test_least_important_never_empties_a_layer():
    scores = torch.tensor([[0.0, 0.1, float("nan")], [5.0, 6.0, 7.0]])
    assert least_important(scores, 3) == {0: [0], 1: [0, 1]}


def test_bad_fraction_or_drop_is_refused():
    with pytest.raises(ValueError, match="fraction_per_step"):
        iterative_prune(planted_model(), {"val": planted_batches()}, ranking="ablation", fraction_per_step=1.0,
                        max_drop=0.0, count_parameters=count_parameters)
    with pytest.raises(ValueError, match="max_drop"):
        iterative_prune(planted_model(), {"val": planted_batches()}, ranking="ablation", fraction_per_step=0.5,
                        max_drop=-0.01, count_parameters=count_parameters)


def test_finetune_moves_the_weights_and_keeps_the_pruned_shape():
    net = planted_model()
    net.prune_heads({0: [0]})
    before = net.blocks[0].attn.v_proj.weight.clone()
    finetune_steps(net, planted_batches(), steps=3, lr=1e-2)
    assert not torch.equal(before, net.blocks[0].attn.v_proj.weight)
    assert net.heads_per_layer == [3, 4] and not net.training
