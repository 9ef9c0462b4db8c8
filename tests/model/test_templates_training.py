"""Soft templates in training: weight 0 is the free model bit for bit; the KL is its own, falling, loss term."""

from __future__ import annotations

import functools

import lightning as L
import torch
from torch.utils.data import DataLoader

from headlab.lit import HeadClassifierModule
from headlab.model import ModelConfig

BASE = dict(vocab_size=12, n_classes=2, max_len=10, d_model=16, n_heads=2, n_layers=1, dropout=0.1)


def _batches(n: int = 8) -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 12, (n, 4, 10), generator=generator)
    ids[:, :, 0] = 1
    mask = torch.ones(n, 4, 10, dtype=torch.bool)
    mask[:, :2, 7:] = False
    labels = (ids[:, :, 3] > 7).long()
    return [{"input_ids": i.masked_fill(~m, 0), "attention_mask": m, "labels": y} for i, m, y in zip(ids, mask, labels)]


def _fit(steps: int, lr: float = 1e-2, **model) -> tuple[HeadClassifierModule, L.Trainer]:
    L.seed_everything(0)
    module = HeadClassifierModule(ModelConfig(**{**BASE, **model}), optimizer=functools.partial(torch.optim.AdamW, lr=lr))
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(module, DataLoader(_batches(), batch_size=None))
    return module, trainer


def _same(a: HeadClassifierModule, b: HeadClassifierModule) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.net.state_dict().values(), b.net.state_dict().values()))


def test_soft_template_with_weight_zero_trains_exactly_like_the_free_model():
    free, _ = _fit(5)
    zero, _ = _fit(5, template=[["previous", "free"]], template_mode="soft", template_weight=0.0)
    pulled, trainer = _fit(5, template=[["previous", "free"]], template_mode="soft", template_weight=1.0)
    assert _same(free, zero)
    assert not _same(free, pulled)  # the same run with a non-zero weight does move differently
    assert "train/template_kl" in trainer.callback_metrics


def test_annealed_weight_stops_pulling_after_its_steps():
    # past the anneal window the soft run takes the free run's gradients: its updates differ only by where it started
    module, trainer = _fit(3, template=[["previous", "free"]], template_mode="soft", template_anneal_steps=2)
    assert module.net.template_loss_weight(trainer.global_step) == 0.0
    assert module.net.template_loss_weight(1) == 0.5


def test_soft_training_pulls_the_head_towards_its_template():
    module, _ = _fit(0, template=[["previous", "free"]], template_mode="soft", template_weight=5.0)
    batch = _batches()[0]
    before = module.net.eval()(batch["input_ids"], batch["attention_mask"], template_kl=True).template_kl.item()
    module, _ = _fit(30, lr=3e-2, template=[["previous", "free"]], template_mode="soft", template_weight=5.0)
    after = module.net.eval()(batch["input_ids"], batch["attention_mask"], template_kl=True).template_kl.item()
    assert after < 0.5 * before
