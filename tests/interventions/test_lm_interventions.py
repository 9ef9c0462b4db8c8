"""Importance and pruning of a causal LM: its examples are next-token predictions, scored as its training
scores them (`HeadlabLMModule`), and its heads are gated, zeroed and removed through three separate paths
that must agree."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from headlab.interventions import ScoreTally, evaluate_gated, gradient_importance, single_head_ablation
from headlab.interventions.batches import predictions
from headlab.interventions.pruning import iterative_prune
from headlab.model.encoder import count_parameters
from headlab.model.lm import HeadlabLM, LMConfig

VOCAB, SEQ = 11, 9


@pytest.fixture(scope="module")
def lm():
    torch.manual_seed(3)
    net = HeadlabLM(LMConfig(vocab_size=VOCAB, max_len=SEQ, n_layers=2, n_heads=3, d_model=12, attn_only=False)).eval()
    generator = torch.Generator().manual_seed(4)
    batches = []
    for size, real in ((5, SEQ), (4, 6)):  # the second batch ends in padding: its last 3 positions are not tokens
        ids = torch.randint(0, VOCAB, (size, SEQ), generator=generator)
        mask = torch.zeros(size, SEQ, dtype=torch.bool)
        mask[:, :real] = True
        batches.append({"input_ids": ids, "attention_mask": mask})
    return net, batches


def _by_hand(net, batches, gates=None):
    """Mean next-token loss and accuracy over every real position followed by a real token."""
    losses, correct = [], []
    with torch.no_grad():
        for b in batches:
            logits = net(b["input_ids"], b["attention_mask"], head_gates=gates).logits
            for row in range(b["input_ids"].size(0)):
                n = int(b["attention_mask"][row].sum())
                target = b["input_ids"][row, 1:n]
                losses.append(F.cross_entropy(logits[row, : n - 1].double(), target, reduction="none"))
                correct.append(logits[row, : n - 1].argmax(-1) == target)
    return float(torch.cat(losses).mean()), float(torch.cat(correct).double().mean())


def test_lm_scores_are_its_next_token_loss_and_accuracy_over_real_positions(lm):
    net, batches = lm
    scores = evaluate_gated(net, batches)
    loss, acc = _by_hand(net, batches)
    assert float(scores.loss[0]) == pytest.approx(loss, rel=1e-9)
    assert float(scores.acc[0]) == pytest.approx(acc, abs=1e-12)
    assert math.isnan(float(scores.f1[0])) and scores.row(0)["f1"] is None  # JSON gets null, not NaN
    # 5 * 8 + 4 * 5 predictions: the padded tail of batch 2 predicts nothing and is never predicted
    assert sum(predictions(torch.zeros(1, *b["input_ids"].shape, VOCAB), b)[1].numel() for b in batches) == 60


def test_a_tally_without_f1_keeps_the_same_loss_and_accuracy():
    torch.manual_seed(0)
    logits, labels = torch.randn(3, 50, 4), torch.randint(0, 4, (50,))
    full, lean = ScoreTally(3, 4), ScoreTally(3, 4, f1=False)
    for tally in (full, lean):
        tally.update(logits[:, :20], labels[:20])
        tally.update(logits[:, 20:], labels[20:])
    a, b = full.compute(), lean.compute()
    torch.testing.assert_close(a.loss, b.loss, rtol=0, atol=0)
    torch.testing.assert_close(a.acc, b.acc, rtol=0, atol=0)
    assert torch.isnan(b.f1).all() and not torch.isnan(a.f1).any()


def test_gating_zeroing_and_removing_an_lm_head_give_the_same_network(lm):
    net, batches = lm
    b = batches[0]
    gates = net.head_gates.clone()
    gates[1, 2] = 0.0
    pruned = copy.deepcopy(net)
    pruned.prune_heads({1: [2]})
    assert pruned.heads_per_layer == [3, 2] and pruned.head_gates.tolist() == [[1, 1, 1], [1, 1, 0]]
    with torch.no_grad():
        gated = net(b["input_ids"], b["attention_mask"], head_gates=gates).logits
        removed = pruned(b["input_ids"], b["attention_mask"]).logits
    torch.testing.assert_close(removed, gated, atol=1e-5, rtol=1e-5)
    result = single_head_ablation(net, batches, max_rows=7)  # 7 rows: one or two copies per pass, several groups
    base_loss, base_acc = _by_hand(net, batches)
    loss, acc = _by_hand(net, batches, gates)
    assert float(result.dloss[1, 2]) == pytest.approx(loss - base_loss, abs=1e-6)
    assert float(result.dacc[1, 2]) == pytest.approx(acc - base_acc, abs=1e-12)
    assert torch.isnan(result.df1).all()
    with pytest.raises(ValueError, match="cannot prune all 3 heads"):
        pruned.prune_heads({0: [0, 1, 2]})


def test_lm_gradient_importance_is_the_mean_over_sequences_of_the_abs_gate_gradient(lm):
    net, batches = lm
    total, n = torch.zeros(2, 3, dtype=torch.float64), 0
    for b in batches:  # one sequence at a time, the gate as the forward's head_gates (not the hook the code uses)
        for row in range(b["input_ids"].size(0)):
            gates = torch.ones(2, 3, requires_grad=True)
            one = {k: v[row: row + 1] for k, v in b.items()}
            logits = net(one["input_ids"], one["attention_mask"], head_gates=gates).logits
            k = int(one["attention_mask"].sum())
            loss = F.cross_entropy(logits[0, : k - 1], one["input_ids"][0, 1:k], reduction="sum")
            (grad,) = torch.autograd.grad(loss, gates)
            total += grad.abs().double()
            n += 1
    torch.testing.assert_close(gradient_importance(net, batches), total / n, atol=1e-6, rtol=1e-5)


def test_pruning_an_lm_removes_heads_until_the_drop_and_keeps_the_gated_logits(lm):
    net, batches = lm
    splits = {"val": batches, "test": batches[:1]}
    result = iterative_prune(net, splits, ranking="ablation", fraction_per_step=0.2, max_drop=1.0,
                             count_parameters=lambda m: count_parameters(m, non_embedding=False))
    assert result.net.heads_per_layer == [1, 1]  # a drop of 1.0 never stops it: every layer down to one head
    gates = torch.ones(2, 3)
    for layer, heads in enumerate(result.removed):
        gates[layer, heads] = 0.0
    b = batches[1]
    with torch.no_grad():
        torch.testing.assert_close(result.net(b["input_ids"], b["attention_mask"]).logits,
                                   net(b["input_ids"], b["attention_mask"], head_gates=gates).logits, atol=1e-5, rtol=1e-5)
    assert [s.n_heads for s in result.steps] == [6, 5, 4, 3, 2]
    assert result.steps[-1].n_params < result.steps[0].n_params


def test_a_pruned_lm_checkpoint_loads_back_pruned(lm, tmp_path):
    from headlab.reload import load_network, save_pruned

    net, batches = lm
    pruned = copy.deepcopy(net)
    pruned.prune_heads({0: [0], 1: [1, 2]})
    path = save_pruned(tmp_path / "p.ckpt", pruned, [[0], [1, 2]], step=5, epoch=0, pruned_from="x.ckpt", settings={})
    back = load_network(path)
    assert isinstance(back, HeadlabLM) and back.heads_per_layer == [2, 1]
    b = batches[0]
    with torch.no_grad():
        torch.testing.assert_close(back(b["input_ids"]).logits, pruned(b["input_ids"]).logits, rtol=0, atol=0)
