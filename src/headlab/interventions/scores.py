"""Classification scores accumulated over batches, for many model variants at once.

Ablation evaluates one copy of the data per ablated head in a single forward; `ScoreTally`
keeps one confusion matrix and one loss sum per copy, so every copy's loss, accuracy and
macro-F1 come out of the same pass. A causal LM's predictions are next tokens over its vocabulary:
`ScoreTally(..., f1=False)` keeps only the correct counts (a vocabulary-square confusion matrix would
cost memory, and macro-F1 over next tokens is no metric the LM literature reads), and its F1 is NaN.
Pure torch: logits and labels in, numbers out.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor


@dataclass(frozen=True)
class Scores:
    """Mean cross-entropy, accuracy and macro-F1 of each variant, each `[variant]`."""

    loss: Tensor
    acc: Tensor
    f1: Tensor

    def row(self, i: int) -> dict[str, float | None]:
        """Variant i as JSON takes it: an F1 that is not measured (an LM's) is None, not NaN."""
        f1 = float(self.f1[i])
        return {"loss": float(self.loss[i]), "acc": float(self.acc[i]), "f1": None if f1 != f1 else f1}


class ScoreTally:
    """Loss sums and confusion matrices `[variant, true, predicted]` over batches.

    >>> tally = ScoreTally(n_variants=1, n_classes=2)
    >>> tally.update(torch.tensor([[[2.0, 0.0], [0.0, 2.0], [2.0, 0.0]]]), torch.tensor([0, 1, 1]))
    >>> s = tally.compute(); round(float(s.acc[0]), 4), round(float(s.f1[0]), 4)
    (0.6667, 0.6667)
    """

    def __init__(self, n_variants: int, n_classes: int, f1: bool = True) -> None:
        self.n_classes = n_classes
        self.loss_sum = torch.zeros(n_variants, dtype=torch.float64)
        self.correct = torch.zeros(n_variants, dtype=torch.int64)
        self.total = torch.zeros(n_variants, dtype=torch.int64)
        # [variant, true, predicted]; None without F1 (correct and total give the accuracy)
        self.confusion = torch.zeros(n_variants, n_classes, n_classes, dtype=torch.int64) if f1 else None

    def update(self, logits: Tensor, labels: Tensor) -> None:
        """logits: `[variant, batch, class]`; labels: `[batch]` (the same for every variant)."""
        n_variants, batch, n_classes = logits.shape
        if (n_variants, n_classes) != (self.loss_sum.numel(), self.n_classes) or labels.shape != (batch,):
            raise ValueError(f"expected logits [{self.loss_sum.numel()}, batch, {self.n_classes}] and labels [batch]; "
                             f"got {tuple(logits.shape)} and {tuple(labels.shape)}")
        logits = logits.detach().double().cpu()
        labels = labels.detach().cpu().long()
        target = labels.expand(n_variants, batch)
        self.loss_sum += F.cross_entropy(logits.transpose(1, 2), target, reduction="none").sum(dim=1)
        predicted = logits.argmax(dim=-1)  # [variant, batch]
        self.correct += (predicted == target).sum(dim=1)
        self.total += batch
        if self.confusion is None:
            return
        cell = target * n_classes + predicted
        counts = torch.zeros(n_variants, n_classes * n_classes, dtype=torch.int64)
        counts.scatter_add_(1, cell, torch.ones_like(cell))
        self.confusion += counts.view(n_variants, n_classes, n_classes)

    def compute(self) -> Scores:
        n = self.total.clamp(min=1).double()
        if self.confusion is None:
            return Scores(self.loss_sum / n, self.correct.double() / n, torch.full_like(n, float("nan")))
        return Scores(self.loss_sum / n, accuracy(self.confusion), macro_f1(self.confusion))


def accuracy(confusion: Tensor) -> Tensor:
    """Share of correct predictions (micro accuracy) of each `[variant, true, predicted]` matrix."""
    correct = confusion.diagonal(dim1=-2, dim2=-1).sum(dim=-1).double()
    return correct / confusion.sum(dim=(-2, -1)).clamp(min=1).double()


def macro_f1(confusion: Tensor) -> Tensor:
    """Mean F1 over classes that occur as a label or a prediction (torchmetrics' macro average).

    A class neither present nor predicted has F1 0/0 and is left out, as torchmetrics does.
    """
    tp = confusion.diagonal(dim1=-2, dim2=-1).double()
    fp = confusion.sum(dim=-2).double() - tp
    fn = confusion.sum(dim=-1).double() - tp
    denom = 2 * tp + fp + fn
    present = denom > 0
    f1 = torch.where(present, 2 * tp / denom.clamp(min=1), torch.zeros_like(tp))
    return f1.sum(dim=-1) / present.sum(dim=-1).clamp(min=1)
