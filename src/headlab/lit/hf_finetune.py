"""Fine-tuning a pretrained Hugging Face encoder through Lightning, every head measured from step 0.

`HFFineTuneModule` wraps `headlab.hf.HFClassifier` (the encoder behind the named points, a linear
head on its mean-pooled states) and trains all of it with AdamW on cross-entropy; `DriftCallback`
measures every head (`headlab.hf.drift.measure_drift`: weight drift, JS of its maps from the
pretrained ones, role change, held-out accuracy) before the first step and every `every` steps,
and after the last. `finetune_drift` runs one seed: the split, head importance before (a linear
probe on the frozen pretrained encoder) and after (the fine-tuned model), and the Trainer between.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F

from headlab.data.labeled import LabeledTexts
from headlab.hf.adapter import HFModel
from headlab.hf.classifier import HFClassifier
from headlab.hf.drift import DriftBaseline, DriftSettings, drift_baseline, importance_rows, measure_drift, \
    pretrained_importance
from headlab.hf.importance import encode_batches, stratified_split
from headlab.lit.hf_base import HFTrainModule, fit_on_cpu


class HFFineTuneModule(HFTrainModule):
    """An `HFClassifier` trained end to end (encoder and head) with AdamW at `lr` on cross-entropy
    (`headlab.lit.hf_base`: the optimiser and step the suite builder's LM module shares)."""

    def __init__(self, net: HFClassifier, lr: float = 5e-5) -> None:
        super().__init__(net, lr)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.net(input_ids, attention_mask).logits

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return F.cross_entropy(self(batch["input_ids"], batch["attention_mask"]), batch["labels"])


class DriftCallback(L.Callback):
    """`measure_drift` rows at step 0, every `every` steps and after the last step (into `rows`)."""

    def __init__(self, base: DriftBaseline, test: list[dict[str, torch.Tensor]], seed: int, every: int) -> None:
        self.base, self.test, self.seed, self.every = base, test, seed, every
        self.rows: list[dict[str, Any]] = []
        self._last = -1

    def _measure(self, module: HFFineTuneModule, step: int) -> None:
        if step != self._last:
            self.rows += measure_drift(module.net.encoder, module.net, self.base, self.test, self.seed, step)
            self._last = step

    def on_train_batch_start(self, trainer: L.Trainer, module: HFFineTuneModule, batch: Any, batch_idx: int) -> None:
        if trainer.global_step % self.every == 0:
            self._measure(module, trainer.global_step)

    def on_train_end(self, trainer: L.Trainer, module: HFFineTuneModule) -> None:
        self._measure(module, trainer.global_step)


def finetune_drift(model: Any, tokenizer: Any, data: LabeledTexts, seed: int, settings: DriftSettings = DriftSettings(),
                   importance: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Fine-tune a copy of `model` (an HF encoder) with seed `seed`: (drift rows per (step, layer, head),
    importance rows per (when, layer, head), empty without `importance`). Each step's batch is
    `settings.batch_size` train sentences drawn without replacement by a generator seeded with `seed`."""
    torch.manual_seed(seed)
    train_idx, test_idx = stratified_split(data.labels, settings.test_share, seed)
    test = encode_batches(tokenizer, data, test_idx, settings.batch_size, settings.max_len)
    imp_rows: list[dict[str, Any]] = []
    if importance:
        train = encode_batches(tokenizer, data, train_idx, settings.batch_size, settings.max_len)
        imp_rows += pretrained_importance(model, len(data.label_names), train, test, seed)
    torch.manual_seed(seed)
    net = HFModel(copy.deepcopy(model).train())
    clf = HFClassifier(net, n_classes=len(data.label_names))
    base = drift_baseline(net, tokenizer, data.texts, settings)
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(settings.steps):
        pick = [train_idx[i] for i in torch.randperm(len(train_idx), generator=generator)[: settings.batch_size].tolist()]
        batches.append(encode_batches(tokenizer, data, pick, settings.batch_size, settings.max_len)[0])
    drift = DriftCallback(base, test, seed, settings.every)
    t0 = time.perf_counter()
    fit_on_cpu(HFFineTuneModule(clf, settings.lr), batches, [drift])
    wall = round(time.perf_counter() - t0, 2)
    if importance:
        imp_rows += importance_rows(clf, test, seed, "after")
    for row in drift.rows:
        row["wall_s"] = wall
    return drift.rows, imp_rows
