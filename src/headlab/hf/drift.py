"""Fine-tuning drift per head: how far each head of a pretrained encoder moves while it is fine-tuned.

Kovaleva et al. (2019) and Hao et al. (2020) compared a BERT before and after fine-tuning, once,
post hoc, and found the last layers change most. `finetune_drift` tracks every head during
fine-tuning, from step 0, for one seed (call it per seed): the whole encoder and a linear head on
its mean-pooled states trained with AdamW on a labelled set, and at each measurement, per head,

- `weight_drift`: ||W(t) - W(0)|| / ||W(0)|| over the head's W_Q, W_K, W_V, W_O together (Frobenius);
- `js_from_pretrained`: the Jensen-Shannon divergence (nats) of the head's attention rows from the
  pretrained model's rows on the same probe, smoothed as headlab's pair JS is (0.001/n + 0.999 A
  over the n real keys), averaged over real queries and probe sequences;
- `role` and `role_changed` (the role rule of `headlab.measure` against step 0's);

plus the held-out accuracy. Pure functions (`weight_drift`, `pattern_js_sums`) work on tensors.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from headlab.data.labeled import LabeledTexts
from headlab.hf.adapter import HFModel
from headlab.hf.classifier import HFClassifier
from headlab.hf.importance import encode_batches, stratified_split
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


def finetune_drift(model: Any, tokenizer: Any, data: LabeledTexts, seed: int,
                   settings: DriftSettings = DriftSettings()) -> list[dict[str, Any]]:
    """Fine-tune a copy of `model` (an HF encoder) with seed `seed`; returns one row per (step, layer, head)."""
    torch.manual_seed(seed)
    net = HFModel(copy.deepcopy(model).train())
    clf = HFClassifier(net, n_classes=len(data.label_names))
    train_idx, test_idx = stratified_split(data.labels, settings.test_share, seed)
    test = encode_batches(tokenizer, data, test_idx, settings.batch_size, settings.max_len)
    probe = encode_probe(tokenizer, data.texts, settings.probe_size, settings.max_len, seed=0)
    chunks = probe.chunks(settings.chunk_size)
    start_weights = [copy.deepcopy(b.attn.head_weights()) for b in net.blocks]
    with torch.no_grad():
        net.eval()
        start_patterns = [capture_patterns(net, c["input_ids"], c["attention_mask"]) for c in chunks]
    start_roles = measure_probe(net, chunks, weight_metrics=False).roles
    optimizer = torch.optim.AdamW(clf.parameters(), lr=settings.lr)
    generator = torch.Generator().manual_seed(seed)
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for step in range(settings.steps + 1):
        if step % settings.every == 0 or step == settings.steps:
            rows += _measure(net, clf, chunks, start_weights, start_patterns, start_roles, test, seed, step)
        if step == settings.steps:
            break
        clf.train()
        pick = [train_idx[i] for i in torch.randperm(len(train_idx), generator=generator)[: settings.batch_size].tolist()]
        batch = encode_batches(tokenizer, data, pick, settings.batch_size, settings.max_len)[0]
        loss = F.cross_entropy(clf(batch["input_ids"], batch["attention_mask"]).logits, batch["labels"])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    for row in rows:
        row["wall_s"] = round(time.perf_counter() - t0, 2)
    return rows


@torch.no_grad()
def _measure(net: HFModel, clf: HFClassifier, chunks: list[dict[str, Tensor]], start_weights: list[HeadWeights],
             start_patterns: list[list[Tensor]], start_roles: list[list[str]], test: list[dict[str, Tensor]],
             seed: int, step: int) -> list[dict[str, Any]]:
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
    return rows
