"""A tiny classifier trained in about a second on a planted task whose deciding token is known.

Vocabulary: 0 [PAD], 1 [CLS], 2-4 the three label tokens, 5-19 filler. `where="last"`: the label
token is the sentence's last token (label = last word); `where="anywhere"`: it sits at a random
position (a keyword anywhere). One layer, two heads, cls pooling: the decision reads [CLS]'s row.
"""

from __future__ import annotations

import numpy as np
import torch

from headlab.data.probe import ProbeSet
from headlab.model import HeadlabClassifier, ModelConfig


def planted_probe(n: int, where: str, seed: int) -> ProbeSet:
    rng = np.random.default_rng(seed)
    seqs, labels = [], []
    for _ in range(n):
        length, label = int(rng.integers(8, 16)), int(rng.integers(0, 3))
        body = [int(t) for t in rng.integers(5, 20, length)]
        body[length - 1 if where == "last" else int(rng.integers(0, length))] = 2 + label
        seqs.append((1, *body))
        labels.append(label)
    return ProbeSet(tuple(seqs), tuple(labels), punctuation_ids=())


def train_planted(where: str, seed: int = 0, epochs: int = 6) -> tuple[HeadlabClassifier, ProbeSet, float]:
    """(trained network in eval mode, a held-out probe, its accuracy on the probe)."""
    torch.manual_seed(seed)
    net = HeadlabClassifier(ModelConfig(vocab_size=20, n_classes=3, max_len=20, n_layers=1, n_heads=2, d_model=32,
                                        dropout=0.0, pooling="cls"))
    train = planted_probe(1024, where, seed)
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3)
    for _ in range(epochs):
        for batch in train.batches(64):
            loss = torch.nn.functional.cross_entropy(net(batch["input_ids"], batch["attention_mask"]).logits, batch["labels"])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    probe = planted_probe(128, where, seed + 1)
    with torch.no_grad():
        batch = next(probe.batches(len(probe)))
        acc = (net(batch["input_ids"], batch["attention_mask"]).logits.argmax(-1) == batch["labels"]).double().mean().item()
    return net, probe, acc
