"""Evaluation data as the importance functions consume it, and the gated forward they share.

A batch is a dict of `input_ids`, `attention_mask` `[batch, seq]` and, for a classifier, `labels`
`[batch]`, already on the network's device. A causal LM (`HeadlabLM`) has no labels: its examples
are its next-token predictions (`predictions`), scored as its training scores them. Head sets are `[layer, head]` tensors padded with NaN (scores) or 0
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


def is_lm_network(net: nn.Module) -> bool:
    """A causal LM: logits `[batch, seq, vocab]` for the next token, no classifier head."""
    return not hasattr(net, "classifier")


def n_classes(net: nn.Module) -> int:
    """Classes a prediction chooses among: the classifier's labels, or an LM's vocabulary."""
    return int(net.config.vocab_size) if is_lm_network(net) else int(net.classifier.out_features)


def new_tally(net: nn.Module, n_variants: int) -> ScoreTally:
    """A tally for `net`'s predictions; an LM's keeps accuracy and loss only (its F1 is NaN, see ScoreTally)."""
    return ScoreTally(n_variants, n_classes(net), f1=not is_lm_network(net))


def predictions(logits: Tensor, batch: Batch) -> tuple[Tensor, Tensor]:
    """(`[variant, example, class]`, `[example]`): what each variant predicted, and the truth.

    A classifier's logits are `[variant, batch, class]` and its examples are the sequences (`labels`).
    An LM's are `[variant, batch, seq, vocab]`: position t predicts token t + 1, wherever both are real,
    which is what `HeadlabLMModule` computes its loss and `val/acc` on.

    >>> logits = torch.zeros(1, 1, 3, 5); logits[0, 0, 0, 4] = 1.0
    >>> out, truth = predictions(logits, {"input_ids": torch.tensor([[1, 4, 2]]), "attention_mask": torch.ones(1, 3)})
    >>> tuple(out.shape), truth.tolist()
    ((1, 2, 5), [4, 2])
    """
    if logits.dim() == 3:
        return logits, batch["labels"]
    real = batch["attention_mask"].bool()
    keep = real[:, :-1] & real[:, 1:]  # [batch, seq - 1]
    return logits[:, :, :-1][:, keep], batch["input_ids"][:, 1:][keep]


def n_sequences(batch: Batch) -> int:
    return int(batch["input_ids"].size(0))


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
        tally = new_tally(net, len(variants))
        for batch in batches:
            logits = [net(batch["input_ids"], batch["attention_mask"],
                          head_gates=None if g is None else g.to(net.head_gates)).logits for g in variants]
            tally.update(*predictions(torch.stack(logits), batch))
        return tally.compute()
    finally:
        net.train(was_training)
