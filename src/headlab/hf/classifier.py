"""A pretrained encoder with a linear head: the network shape `headlab.interventions` scores heads on.

Head importance needs a loss, so a label set and a head: `HFClassifier` mean-pools `HFEncoder`'s
last hidden state over real tokens (as sentence-transformers pools all-MiniLM-L6-v2) into a
`classifier` `nn.Linear`. It meets the interventions' contract: `blocks[i].attn.hook_z` and
`.n_heads`, `head_gates` `[layer, head]`, `net(ids, mask, head_gates=g).logits`, `classifier`.
`fit_linear_head` trains only the head on frozen features (a probe, seconds on CPU), so the
encoder's heads are scored as pretrained.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headlab.hf.adapter import HFEncoder
from headlab.model.encoder import ClassifierOutput


class HFClassifier(nn.Module):
    def __init__(self, encoder: HFEncoder, n_classes: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.classifier = nn.Linear(int(encoder.model.config.hidden_size), n_classes)
        self.train(encoder.training)

    @property
    def blocks(self) -> nn.ModuleList:
        return self.encoder.blocks

    @property
    def head_gates(self) -> Tensor:
        return self.encoder.head_gates

    def forward(self, input_ids: Tensor, attention_mask: Tensor, return_patterns: bool = False,
                head_gates: Tensor | None = None) -> ClassifierOutput:
        out = self.encoder(input_ids, attention_mask, return_patterns=return_patterns, head_gates=head_gates)
        return ClassifierOutput(self.classifier(mean_pool(out.hidden, attention_mask)), out.patterns)


def mean_pool(hidden: Tensor, attention_mask: Tensor) -> Tensor:
    """[batch, seq, d] -> [batch, d]: the mean over real tokens."""
    weights = attention_mask.to(hidden.dtype)[:, :, None]
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)


def fit_linear_head(net: HFClassifier, batches: Sequence[dict[str, Tensor]], steps: int = 200, lr: float = 0.1,
                    seed: int = 0) -> float:
    """Train `net.classifier` alone (full-batch Adam on frozen pooled features); returns the final train loss."""
    torch.manual_seed(seed)
    with torch.no_grad():
        was_training = net.training
        net.eval()
        features = torch.cat([mean_pool(net.encoder(b["input_ids"], b["attention_mask"]).hidden, b["attention_mask"])
                              for b in batches])
        net.train(was_training)
    labels = torch.cat([b["labels"] for b in batches])
    nn.init.zeros_(net.classifier.weight)
    nn.init.zeros_(net.classifier.bias)
    optimizer = torch.optim.Adam(net.classifier.parameters(), lr=lr)
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(net.classifier(features), labels)
        loss.backward()
        optimizer.step()
    return float(loss.detach())
