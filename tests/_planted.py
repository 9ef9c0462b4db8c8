"""A tiny classifier trained in about a second on a planted task whose deciding token is known.

Vocabulary: 0 [PAD], 1 [CLS], 2-4 the three label tokens, 5-19 filler. `where="last"`: the label
token is the sentence's last token (label = last word); `where="anywhere"`: it sits at a random
position (a keyword anywhere). One layer, two heads, cls pooling: the decision reads [CLS]'s row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from headlab.data.probe import ProbeSet
from headlab.measure import Measurement, measure_probe, model_decision, probe_chunks
from headlab.model import HeadlabClassifier, ModelConfig


@dataclass
class Planted:
    net: HeadlabClassifier  # trained, in eval mode
    probe: ProbeSet  # held out
    acc: float  # on the probe
    measurements: list[Measurement] = field(default_factory=list)  # step 0 and after every epoch (task view on)


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


def train_planted(where: str, seed: int = 0, epochs: int = 6) -> Planted:
    """Train on 1,024 planted sentences (16 steps an epoch), measuring the probe at step 0 and after each epoch."""
    torch.manual_seed(seed)
    net = HeadlabClassifier(ModelConfig(vocab_size=20, n_classes=3, max_len=20, n_layers=1, n_heads=2, d_model=32,
                                        dropout=0.0, pooling="cls"))
    train, probe = planted_probe(1024, where, seed), planted_probe(128, where, seed + 1)
    chunks = probe_chunks(probe, 64)
    measure = lambda step, epoch: measure_probe(net, chunks, step=step, epoch=epoch, weight_metrics=False,  # noqa: E731
                                                decision=model_decision(net))
    measurements, step = [measure(0, 0)], 0
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3)
    for epoch in range(epochs):
        for batch in train.batches(64):
            loss = torch.nn.functional.cross_entropy(net(batch["input_ids"], batch["attention_mask"]).logits, batch["labels"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
        measurements.append(measure(step, epoch))
    net.eval()
    with torch.no_grad():
        batch = next(probe.batches(len(probe)))
        acc = (net(batch["input_ids"], batch["attention_mask"]).logits.argmax(-1) == batch["labels"]).double().mean().item()
    return Planted(net, probe, acc, measurements)
