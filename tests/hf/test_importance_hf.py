"""Head importance on MiniLM through headlab.interventions: the gates before o_proj make it work.

The interventions gate heads through `hook_z` (a forward hook); the references below gate the
same heads through the other mechanism, `head_gates`, so each check compares two code paths.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from headlab.hf import HFEncoder
from headlab.hf.classifier import HFClassifier, fit_linear_head
from headlab.data.english import load_en_polarity
from headlab.interventions import evaluate_gated, gradient_importance, single_head_ablation


def _batches(tokenizer, picks: list[int], size: int) -> list[dict[str, torch.Tensor]]:
    data = load_en_polarity()
    out = []
    for start in range(0, len(picks), size):
        idx = picks[start : start + size]
        enc = tokenizer([data.texts[i] for i in idx], padding=True, return_tensors="pt")
        out.append({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"].bool(),
                    "labels": torch.tensor([data.labels[i] for i in idx])})
    return out


def _classifier(minilm) -> tuple[HFClassifier, list[dict[str, torch.Tensor]]]:
    model, tokenizer = minilm
    net = HFClassifier(HFEncoder(model), n_classes=2)
    train = _batches(tokenizer, list(range(0, 200, 5)), size=20)  # 20 neg + 20 pos
    assert fit_linear_head(net, train, steps=100) < 0.3
    return net, _batches(tokenizer, [1, 101], size=2)  # 1 neg + 1 pos, unseen


def test_single_head_ablation_equals_closing_that_heads_gate(minilm):
    net, test = _classifier(minilm)
    result = single_head_ablation(net, test)
    for layer, head in ((0, 3), (4, 7)):
        gates = torch.ones(6, 12)
        gates[layer, head] = 0.0
        closed = evaluate_gated(net, test, gates)
        torch.testing.assert_close(result.dloss[layer, head], (closed.loss - result.base.loss)[0], atol=1e-5, rtol=0)
    assert torch.isfinite(result.dloss).all() and result.dloss.abs().max() > 1e-4  # heads do matter


def test_gradient_importance_equals_per_example_gate_gradients(minilm):
    net, test = _classifier(minilm)
    scores = gradient_importance(net, test)
    batch = test[0]
    expected = torch.zeros(6, 12, dtype=torch.float64)
    for i in range(batch["labels"].numel()):
        gates = torch.ones(6, 12, requires_grad=True)
        logits = net(batch["input_ids"][i : i + 1], batch["attention_mask"][i : i + 1], head_gates=gates).logits
        F.cross_entropy(logits, batch["labels"][i : i + 1]).backward()
        expected += gates.grad.abs().double()
    torch.testing.assert_close(scores, expected / batch["labels"].numel(), atol=1e-5, rtol=1e-4)
    assert (scores > 0).all()
