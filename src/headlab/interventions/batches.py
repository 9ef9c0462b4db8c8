"""Evaluation data as the importance functions consume it, and the gated forward they share.

A batch is a dict of `input_ids`, `attention_mask` `[batch, seq]` and `labels` `[batch]`, already
on the network's device. Head sets are `[layer, head]` tensors padded with NaN (scores) or 0
(gates) beyond a pruned layer's live heads, the layout of `HeadlabClassifier.head_gates`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch
from torch import Tensor, nn

from headlab.interventions.scores import Scores, ScoreTally

Batch = Mapping[str, Tensor]


def heads_per_layer(net: nn.Module) -> list[int]:
    """Live head count of each layer of `net.blocks`."""
    return [int(block.attn.n_heads) for block in net.blocks]


def live_mask(net: nn.Module) -> Tensor:
    """`[layer, max head]` True where a live head sits (False in a pruned layer's padding)."""
    counts = heads_per_layer(net)
    mask = torch.zeros(len(counts), max(counts), dtype=torch.bool)
    for layer, n in enumerate(counts):
        mask[layer, :n] = True
    return mask


def n_classes(net: nn.Module) -> int:
    return int(net.classifier.out_features)


@torch.no_grad()
def evaluate_gated(net: nn.Module, batches: Iterable[Batch], gates: Sequence[Tensor] | Tensor | None = None) -> Scores:
    """Loss / accuracy / macro-F1 of `net` under each gate setting `[layer, head]` (None: as it is).

    `gates` may be one `[layer, head]` tensor or a stack `[variant, layer, head]`; each variant is
    a full pass over `batches`. Gates replace `net.head_gates` (0 = head removed exactly).
    """
    was_training = net.training
    net.eval()
    try:
        if gates is None:
            variants: list[Tensor | None] = [None]
        else:
            stacked = torch.as_tensor(gates) if not isinstance(gates, Tensor) else gates
            variants = list(stacked.unsqueeze(0) if stacked.dim() == 2 else stacked)
        tally = ScoreTally(len(variants), n_classes(net))
        for batch in batches:
            logits = [net(batch["input_ids"], batch["attention_mask"],
                          head_gates=None if g is None else g.to(net.head_gates)).logits for g in variants]
            tally.update(torch.stack(logits), batch["labels"])
        return tally.compute()
    finally:
        net.train(was_training)
