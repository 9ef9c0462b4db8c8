"""Fine-tuning drift per head: how far each head of a pretrained encoder moves while it is fine-tuned.

Kovaleva et al. (2019) and Hao et al. (2020) compared a BERT before and after fine-tuning, once,
post hoc, and found the last layers change most. `finetune_drift` tracks every head during
fine-tuning, from step 0, for one seed: the whole encoder and a linear head on its mean-pooled
states trained with AdamW on a labelled set, and at each measurement, per head,

- `weight_drift`: ||W(t) - W(0)|| / ||W(0)|| over the head's W_Q, W_K, W_V, W_O together (Frobenius);
- `js_from_pretrained`: the Jensen-Shannon divergence (nats) of the head's attention rows from the
  pretrained model's rows on the same probe, smoothed as headlab's pair JS is (0.001/n + 0.999 A
  over the n real keys), averaged over real queries and probe sequences;
- `role` and `role_changed` (the role rule of `headlab.measure` against step 0's);

plus the held-out accuracy. Pure functions (`weight_drift`, `pattern_js_sums`) work on tensors.

Head importance before and after (`importance_rows`): single-head ablation (loss increase) and
gradient importance on the held-out part, before with a linear head fitted on the frozen
pretrained encoder's features of the train part (the `importance=true` probe of headlab-analyze-hf),
after with the fine-tuned encoder and its own head. The fine-tuning itself runs through a
LightningModule, `headlab.lit.hf_finetune` (`finetune_drift` there, one seed per call), which calls
`measure_drift` on the cadence of `DriftSettings`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from headlab.hf.adapter import HFModel
from headlab.hf.classifier import HFClassifier
from headlab.hf.probe import encode_probe
from headlab.measure import capture_patterns, measure_probe
from headlab.model.attention import HeadWeights

JS_SMOOTHING = 0.001


def weight_drift(before: HeadWeights, after: HeadWeights) -> Tensor:
    """`[head]`: relative Frobenius distance of each head's (W_Q, W_K, W_V, W_O) from `before`."""
    diff = sum((a - b).pow(2).flatten(1).sum(1) for a, b in
               ((after.W_Q, before.W_Q), (after.W_K, before.W_K), (after.W_V, before.W_V), (after.W_O, before.W_O)))
    base = sum(w.pow(2).flatten(1).sum(1) for w in (before.W_Q, before.W_K, before.W_V, before.W_O))
    return (diff / base).sqrt()


def pattern_js_sums(p: Tensor, q: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
    """(sum over real queries of JS(p_i, q_i) per head `[head]`, number of real queries): p, q
    `[batch, head, query, key]` over the same tokens, attention_mask `[batch, seq]` (True = real)."""
    mask = attention_mask.bool()
    real_key = mask[:, None, None, :]  # [batch, 1, 1, key]
    n_keys = mask.sum(-1).clamp(min=1).to(p.dtype)[:, None, None, None]
    smooth = lambda a: torch.where(real_key, a.double() * (1 - JS_SMOOTHING) + JS_SMOOTHING / n_keys.double(), 0.0)  # noqa: E731
    ps, qs = smooth(p), smooth(q)
    m = 0.5 * (ps + qs)
    safe = lambda a: torch.where(real_key, a, 1.0)  # noqa: E731  log 1 = 0 on padded keys
    kl_p = (ps * (safe(ps).log() - safe(m).log())).sum(-1)
    kl_q = (qs * (safe(qs).log() - safe(m).log())).sum(-1)
    js = 0.5 * (kl_p + kl_q)  # [batch, head, query]
    real_query = mask[:, None, :].double()
    return (js * real_query).sum((0, 2)), mask.sum()


def importance_rows(net: HFClassifier, test: list[dict[str, Tensor]], seed: int, when: str) -> list[dict[str, Any]]:
    """One row per head: `ablation_dloss` (held-out loss increase when the head alone is closed) and
    `grad_importance` of `net` on the held-out batches `test`, labelled `when` (before / after)."""
    from headlab.interventions import measure_importance

    was_training = net.training
    net.eval()
    result = measure_importance(net, test, random_seed=seed, curves=False)
    net.train(was_training)
    dloss, grad = result.ablation.dloss, result.gradient
    return [{"seed": seed, "when": when, "layer": layer, "head": head, "ablation_dloss": float(dloss[layer, head]),
             "grad_importance": float(grad[layer, head]), "test_loss": float(result.base.loss[0]),
             "test_acc": float(result.base.acc[0])}
            for layer in range(dloss.shape[0]) for head in range(dloss.shape[1])]


def pretrained_importance(model: Any, n_classes: int, train: list[dict[str, Tensor]], test: list[dict[str, Tensor]],
                          seed: int) -> list[dict[str, Any]]:
    """`importance_rows` of the pretrained encoder (a copy of `model`, frozen) under a linear head fitted on
    its mean-pooled features of `train` (fit_linear_head: 200 full-batch Adam steps at lr 0.1)."""
    from headlab.hf.classifier import fit_linear_head

    clf = HFClassifier(HFModel(copy.deepcopy(model).eval()), n_classes=n_classes)
    fit_linear_head(clf, train, seed=seed)
    return importance_rows(clf, test, seed, "before")


@dataclass(frozen=True)
class DriftSettings:
    steps: int = 40  # optimiser steps
    every: int = 10  # measure every this many steps (and at 0 and the end)
    lr: float = 5e-5
    batch_size: int = 16
    max_len: int = 64
    test_share: float = 0.5
    probe_size: int = 64  # texts the maps are compared on (a fixed seeded sample of all texts)
    chunk_size: int = 16


@dataclass
class DriftBaseline:
    """What every measurement compares with: the probe's chunks and, before any step, each head's
    weights, attention maps on the probe and role."""

    chunks: list[dict[str, Tensor]]
    weights: list[HeadWeights]
    patterns: list[list[Tensor]]
    roles: list[list[str]]


@torch.no_grad()
def drift_baseline(net: HFModel, tokenizer: Any, texts: list[str], settings: DriftSettings) -> DriftBaseline:
    """The baseline of `net` as it is now (pretrained) on a fixed seeded probe of `settings.probe_size` texts."""
    probe = encode_probe(tokenizer, texts, settings.probe_size, settings.max_len, seed=0)
    chunks = probe.chunks(settings.chunk_size)
    was_training = net.training
    net.eval()
    weights = [copy.deepcopy(b.attn.head_weights()) for b in net.blocks]
    patterns = [capture_patterns(net, c["input_ids"], c["attention_mask"]) for c in chunks]
    roles = measure_probe(net, chunks, weight_metrics=False).roles
    net.train(was_training)
    return DriftBaseline(chunks, weights, patterns, roles)


@torch.no_grad()
def measure_drift(net: HFModel, clf: HFClassifier, base: DriftBaseline, test: list[dict[str, Tensor]],
                  seed: int, step: int) -> list[dict[str, Any]]:
    """One row per (layer, head) at `step`: weight drift, JS from the pretrained maps, role change, held-out acc."""
    was_training = clf.training
    chunks, start_weights, start_patterns, start_roles = base.chunks, base.weights, base.patterns, base.roles
    clf.eval()
    correct = sum(int((clf(b["input_ids"], b["attention_mask"]).logits.argmax(-1) == b["labels"]).sum()) for b in test)
    acc = correct / sum(len(b["labels"]) for b in test)
    js_sum = [torch.zeros(net.n_heads, dtype=torch.float64) for _ in net.blocks]
    n_queries = 0
    for chunk, before in zip(chunks, start_patterns):
        now = capture_patterns(net, chunk["input_ids"], chunk["attention_mask"])
        for layer, (p, q) in enumerate(zip(now, before)):
            total, n = pattern_js_sums(p, q, chunk["attention_mask"])
            js_sum[layer] += total
        n_queries += int(n)
    roles = measure_probe(net, chunks, weight_metrics=False).roles
    rows = []
    for layer, block in enumerate(net.blocks):
        drift = weight_drift(start_weights[layer], block.attn.head_weights())
        for head in range(block.attn.n_heads):
            rows.append({"seed": seed, "step": step, "layer": layer, "head": head, "weight_drift": float(drift[head]),
                         "js_from_pretrained": float(js_sum[layer][head] / n_queries), "role": roles[layer][head],
                         "role_changed": roles[layer][head] != start_roles[layer][head], "test_acc": acc})
    clf.train(was_training)
    return rows
