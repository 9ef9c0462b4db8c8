"""Which of a pretrained encoder's heads matter for a labelled task, through `headlab.interventions`.

A pretrained encoder has no task head, so importance needs one: a seeded, stratified split of a
labelled source; `fit_linear_head` on the frozen mean-pooled features of the train part; then
`measure_importance` (single-head ablation, gradient importance, the random control; no curves)
on the held-out part. The rows are the long format `headlab-importance` writes (step 0: a
pretrained model is one point), so the same readers and the same heat-map figure apply.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

import torch

from headlab.data.labeled import LabeledTexts
from headlab.errors import ConfigError, DataError
from headlab.hf.adapter import HFEncoder
from headlab.hf.classifier import HFClassifier, fit_linear_head
from headlab.interventions import HeadImportance, evaluate_gated, measure_importance, rank_heads

TOP = 5  # heads listed per ranking in summary.json


@dataclass(frozen=True)
class ImportanceFit:
    """How the linear head is fitted and where the held-out part comes from."""

    test_share: float = 0.5
    seed: int = 0
    steps: int = 200
    lr: float = 0.1
    batch_size: int = 32
    max_len: int = 128

    def __post_init__(self) -> None:
        if isinstance(self.test_share, bool) or not isinstance(self.test_share, (int, float)) \
                or not 0.0 < self.test_share < 1.0:
            raise ConfigError("classifier.test_share", self.test_share, "a share in (0, 1)")
        for key in ("steps", "batch_size"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"classifier.{key}", value, "an integer >= 1")
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float)) or not self.lr > 0:
            raise ConfigError("classifier.lr", self.lr, "a learning rate > 0")


@dataclass
class HFImportance:
    """The fitted classifier, its held-out batches and every head's importance on them."""

    net: HFClassifier
    test_batches: list[dict[str, torch.Tensor]]
    result: HeadImportance
    n_train: int
    n_test: int
    train_loss: float
    train_acc: float
    wall_s: float


def stratified_split(labels: list[int], test_share: float, seed: int) -> tuple[list[int], list[int]]:
    """(train, test) indices: within each class a seeded shuffle, `round(test_share * n)` held out
    (at least one of each, so every class sits in both parts)."""
    rng = random.Random(seed)
    train, test = [], []
    for label in sorted(set(labels)):
        idx = [i for i, y in enumerate(labels) if y == label]
        if len(idx) < 2:
            raise DataError("data", f"class {label} has {len(idx)} example(s); a train/test split needs 2 per class")
        rng.shuffle(idx)
        n_test = min(max(1, round(test_share * len(idx))), len(idx) - 1)
        test += idx[:n_test]
        train += idx[n_test:]
    return sorted(train), sorted(test)


def encode_batches(tokenizer: Any, data: LabeledTexts, indices: list[int], batch_size: int,
                   max_len: int) -> list[dict[str, torch.Tensor]]:
    """Padded batches (`input_ids`, `attention_mask`, `labels`) of `indices`, in their order."""
    out = []
    for start in range(0, len(indices), batch_size):
        idx = indices[start : start + batch_size]
        enc = tokenizer([data.texts[i] for i in idx], padding=True, truncation=True, max_length=max_len,
                        return_tensors="pt")
        out.append({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"].bool(),
                    "labels": torch.tensor([data.labels[i] for i in idx], dtype=torch.long)})
    return out


def head_importance(encoder: HFEncoder, tokenizer: Any, data: LabeledTexts, fit: ImportanceFit) -> HFImportance:
    """Split `data`, fit the linear head on the train part, score every head on the test part."""
    t0 = time.perf_counter()
    train_idx, test_idx = stratified_split(data.labels, fit.test_share, fit.seed)
    train = encode_batches(tokenizer, data, train_idx, fit.batch_size, fit.max_len)
    test = encode_batches(tokenizer, data, test_idx, fit.batch_size, fit.max_len)
    net = HFClassifier(encoder, n_classes=len(data.label_names))
    train_loss = fit_linear_head(net, train, steps=fit.steps, lr=fit.lr, seed=fit.seed)
    train_acc = float(evaluate_gated(net, train).acc[0])
    result = measure_importance(net, test, random_seed=fit.seed, curves=False)
    return HFImportance(net, test, result, len(train_idx), len(test_idx), train_loss, train_acc,
                        time.perf_counter() - t0)


def importance_summary(imp: HFImportance, fit: ImportanceFit) -> dict[str, Any]:
    """The `importance` block of summary.json: the split, the fitted head, the top heads, concentration."""
    r = imp.result
    return {
        "n_train": imp.n_train, "n_test": imp.n_test, "test_share": fit.test_share, "seed": fit.seed,
        "train_loss": imp.train_loss, "train_acc": imp.train_acc, "test": r.base.row(0),
        "n_heads": int((~r.random.isnan()).sum()),
        "heads_for_half_ablation_effect": r.heads_for_half_effect(),
        "top_heads": {k: [f"L{l}H{h}" for l, h in rank_heads(r.scores(k))[:TOP]] for k in ("ablation", "gradient")},
        "wall_s": imp.wall_s,
    }
