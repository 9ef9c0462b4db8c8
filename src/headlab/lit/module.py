"""LightningModule that trains a `HeadlabClassifier`; it only wires loss, metrics and optimiser.

Hydra builds it from three config groups (lightning-hydra-template style): the network's
`ModelConfig` (`model/`, with `vocab_size`, `n_classes` from the data), a `_partial_` optimiser and
an lr-scheduler factory (`optim/`), so `optim=sgd` swaps the optimiser without code changes.
Measurement lives in callbacks (`headlab.lit.callbacks`), so this module stays the same whether
heads are measured or not, and training always uses the fast attention path.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from torchmetrics import MetricCollection
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score

from headlab.model import HeadlabClassifier, ModelConfig
from headlab.model.domains import router_balance


class NonFiniteLossError(RuntimeError):
    """Training diverged: the loss (or, when a checkpoint is due, a parameter) became NaN or infinite.

    Raised before anything non-finite is written: the last checkpoint on disk stays the last good one.
    """

    def __init__(self, step: int, loss: float, what: str = "loss") -> None:
        self.step, self.loss, self.what = step, loss, what
        super().__init__(f"{what} became {loss} at step {step}: training diverged (try a lower optim.lr or a warm-up)")


class HeadClassifierModule(L.LightningModule):
    """Cross-entropy training of a head-measurable Transformer classifier.

    Args:
        model_config: the network's `ModelConfig` (stored in checkpoints so they reload alone).
        optimizer: `optimizer(param_groups) -> Optimizer`, e.g. Hydra's `_partial_` AdamW. Its
            `weight_decay` applies to matrices only, not to biases, LayerNorm or embeddings (the
            usual Transformer recipe). A `fused=True` keyword falls back to torch's default where
            torch has no fused kernel for the parameters (integer weights, an exotic device).
            None: a module for inference or benchmarks only (`configure_optimizers` refuses).
        scheduler: `scheduler(optimizer, total_steps=...)` or `scheduler(optimizer)` -> an lr
            scheduler stepped after every optimiser step (e.g. `headlab.lit.schedule.WarmupSchedule`);
            None: a constant lr.
        compile: wrap the network in `torch.compile` for training steps.

    `optimizer` and `scheduler` may also be given as the plain descriptions stored in a checkpoint's
    hyper-parameters (`{"_target_": ..., **kwargs}`), so `HeadClassifierModule(**hparams)` rebuilds it.
    """

    def __init__(
        self,
        model_config: ModelConfig | Mapping[str, Any],
        optimizer: Callable[..., torch.optim.Optimizer] | Mapping[str, Any] | None = None,
        scheduler: Callable[..., Any] | Mapping[str, Any] | None = None,
        compile: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(model_config, ModelConfig):
            model_config = ModelConfig(**model_config)
        self.optimizer_factory, self.scheduler_factory = _factory(optimizer), _factory(scheduler)
        self.save_hyperparameters({"model_config": asdict(model_config), "optimizer": describe(self.optimizer_factory),
                                   "scheduler": describe(self.scheduler_factory), "compile": bool(compile)})
        self.net = HeadlabClassifier(model_config)
        self._train_forward = torch.compile(self.net) if compile else self.net
        n = model_config.n_classes
        stage_metrics = MetricCollection({"acc": MulticlassAccuracy(n, average="micro"), "f1": MulticlassF1Score(n, average="macro")})
        self.train_metrics = stage_metrics.clone(prefix="train/")
        self.train_metrics.persistent(True)  # a mid-epoch checkpoint keeps the epoch's running train/acc
        self.val_metrics = stage_metrics.clone(prefix="val/")
        self.test_metrics = stage_metrics.clone(prefix="test/")
        self._domain_counts: dict[str, torch.Tensor] = {}  # stage -> [correct, total] x domain, this epoch
        self._router_logits: list[torch.Tensor] = []  # model.domain_router_balance > 0: this training step's
        if model_config.domain_router_balance > 0:
            for block in self.net.blocks:
                if block.attn.domain_router is not None:
                    block.attn.domain_router.register_forward_hook(functools.partial(_keep_in_training, self._router_logits))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Logits `[batch, n_classes]` through the fast attention path."""
        return self.net(input_ids, attention_mask).logits

    def model_step(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(loss, logits) of an evaluation batch (val / test); training goes through `training_loss`."""
        logits = self.net(batch["input_ids"], batch["attention_mask"], domain_ids=batch.get("domain_ids")).logits
        return F.cross_entropy(logits, batch["labels"]), logits

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        self._router_logits.clear()  # only this step's training forward counts
        template_weight = self.net.template_loss_weight(self.global_step)
        out, loss, scored = self.training_loss(batch, template_kl=template_weight > 0)
        logits = out.logits
        if template_weight > 0:  # soft templates (model.template_mode=soft): their KL is its own loss term
            loss = loss + template_weight * out.template_kl
            self.log("train/template_kl", out.template_kl.detach(), batch_size=len(logits))
        if self._router_logits:  # model.domain_router_balance: keep the router from collapsing
            balance = router_balance([z.softmax(dim=-1) for z in self._router_logits])
            self._router_logits.clear()
            loss = loss + self.net.config.domain_router_balance * balance
            self.log("train/router_balance", balance.detach(), batch_size=len(logits))
        if not torch.isfinite(loss):
            raise NonFiniteLossError(self.global_step, float(loss))
        if scored is None:
            self.train_metrics.update(logits.detach(), batch["labels"])
        elif scored.any():
            self.train_metrics.update(logits.detach()[scored], batch["labels"][scored])
        self.log("train/loss", loss, prog_bar=True, batch_size=len(logits))
        return loss

    def training_loss(self, batch: dict[str, torch.Tensor], template_kl: bool) -> tuple[Any, torch.Tensor, torch.Tensor | None]:
        """(the training forward's output, the task loss, which rows count in train/acc: None = all).
        The step adds the template and router terms; a subclass (distillation) overrides only this."""
        out = self._train_forward(batch["input_ids"], batch["attention_mask"], template_kl=template_kl,
                                  domain_ids=batch.get("domain_ids"))
        return out, F.cross_entropy(out.logits, batch["labels"]), None

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Refuse to write non-finite weights (the last checkpoint stays the last good one) and
        store the RNG states, so a resumed run draws the same dropout masks as an uninterrupted one."""
        for name, param in self.net.named_parameters():
            if not torch.isfinite(param).all():
                raise NonFiniteLossError(self.global_step, float("nan"), what=f"parameter {name}")
        checkpoint["headlab_rng"] = _collect_rng_states()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self._rng_to_restore = checkpoint.get("headlab_rng")
        # Lightning keeps the datamodule's state under its class name: a checkpoint written before each
        # source had its own class holds it as "TextDataModule" (it runs before restore_datamodule reads it).
        datamodule = getattr(self._trainer, "datamodule", None) if self._trainer is not None else None
        if datamodule is not None and "TextDataModule" in checkpoint:
            checkpoint.setdefault(type(datamodule).__qualname__, checkpoint["TextDataModule"])

    def on_train_start(self) -> None:
        # Restored as late as possible: nothing between the checkpoint load and here may draw
        # random numbers differently from the uninterrupted run.
        states = getattr(self, "_rng_to_restore", None)
        if states is not None:
            _set_rng_states(states)
            self._rng_to_restore = None

    def on_train_epoch_end(self) -> None:
        self.log_dict(self.train_metrics.compute())
        self.train_metrics.reset()

    def _eval_step(self, batch: dict[str, torch.Tensor], metrics: MetricCollection, stage: str) -> None:
        loss, logits = self.model_step(batch)
        metrics.update(logits, batch["labels"])
        self.log(f"{stage}/loss", loss, batch_size=len(logits))
        if batch.get("domain_ids") is not None:  # multidomain / files with a domain column
            self._count_by_domain(stage, (logits.argmax(-1) == batch["labels"]).float(), batch["domain_ids"])

    def _count_by_domain(self, stage: str, correct: torch.Tensor, domain_ids: torch.Tensor) -> None:
        """Per-domain (correct, total) of the epoch; ids < 0 (a domain absent from train) are not counted."""
        known = domain_ids >= 0
        ids, hits, before = domain_ids[known], correct[known], self._domain_counts.get(stage)
        size = max(self.net.config.n_domains, int(ids.max()) + 1 if ids.numel() else 0,
                   before.shape[1] if before is not None else 0)
        counts = torch.stack([torch.bincount(ids, weights=hits, minlength=size), torch.bincount(ids, minlength=size).float()])
        self._domain_counts[stage] = counts if before is None else counts + F.pad(before, (0, size - before.shape[1]))

    def _log_domain_accuracy(self, stage: str) -> None:
        """`<stage>/acc_domain_<name>` (the train split's domain tag, else the id) of the epoch."""
        counts = self._domain_counts.pop(stage, None)
        if counts is None:
            return
        if self.trainer.world_size > 1:  # every rank counted its shard (same size: n_domains)
            counts = self.all_gather(counts).sum(dim=0)
        names = getattr(self.trainer.datamodule, "domain_names", None) or []
        for domain, (correct, total) in enumerate(counts.T.tolist()):
            if total > 0:
                name = names[domain] if domain < len(names) else str(domain)
                self.log(f"{stage}/acc_domain_{name}", correct / total)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._eval_step(batch, self.val_metrics, "val")

    def on_validation_epoch_end(self) -> None:
        self.log_dict(self.val_metrics.compute(), prog_bar=True)
        self.val_metrics.reset()
        self._log_domain_accuracy("val")

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._eval_step(batch, self.test_metrics, "test")

    def on_test_epoch_end(self) -> None:
        self.log_dict(self.test_metrics.compute())
        self.test_metrics.reset()
        self._log_domain_accuracy("test")

    def configure_optimizers(self) -> dict[str, Any]:
        if self.optimizer_factory is None:
            raise ValueError("HeadClassifierModule was built without an optimizer: pass optimizer=partial(...) to train it")
        decay, no_decay = [], []
        for name, param in self.net.named_parameters():
            if param.requires_grad:
                (decay if param.ndim >= 2 and "embed" not in name else no_decay).append(param)
        groups = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]  # the first takes the optimiser's decay
        fused = getattr(self.optimizer_factory, "keywords", {}).get("fused")
        if fused and not _fused_supported(self.net):
            optimizer = self.optimizer_factory(groups, fused=False)
        else:
            optimizer = self.optimizer_factory(groups)
        if self.scheduler_factory is None:
            return {"optimizer": optimizer}
        total = max(1, int(self.trainer.estimated_stepping_batches))
        if "total_steps" in inspect.signature(self.scheduler_factory).parameters:
            scheduler = self.scheduler_factory(optimizer, total_steps=total)
        else:
            scheduler = self.scheduler_factory(optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def _keep_in_training(kept: list[torch.Tensor], module: torch.nn.Module, args: Any, output: torch.Tensor) -> None:
    """Forward hook: keep a module's output from training-mode forwards only."""
    if module.training:
        kept.append(output)


def describe(factory: Any) -> dict[str, Any] | None:
    """A plain-data description of an optimiser / scheduler factory, for checkpoints' hyper-parameters
    (loadable with weights_only=True) and for `_factory` to rebuild it."""
    if factory is None:
        return None
    if isinstance(factory, functools.partial):
        target, kwargs, partial = factory.func, dict(factory.keywords), True
    else:
        target, kwargs, partial = type(factory), dict(vars(factory)), False
    described = {"_target_": f"{target.__module__}.{target.__qualname__}", **kwargs}
    return {**described, "_partial_": True} if partial else described


def _factory(value: Any) -> Any:
    if isinstance(value, Mapping):
        import hydra

        return hydra.utils.instantiate(dict(value), _convert_="all")
    return value


def _fused_supported(net: torch.nn.Module) -> bool:
    """Whether torch has a fused optimiser kernel for these parameters (float, on CPU / CUDA / MPS)."""
    params = list(net.parameters())
    return bool(params) and all(p.is_floating_point() and p.device.type in ("cpu", "cuda", "mps") for p in params)


def _collect_rng_states() -> dict[str, Any]:
    """torch / numpy / python RNG states as tensors and plain lists (loadable with weights_only=True)."""
    import random

    import numpy as np

    kind, keys, pos, has_gauss, cached = np.random.get_state()
    version, internal, gauss = random.getstate()
    states: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": [str(kind), torch.from_numpy(np.asarray(keys, dtype=np.int64)), int(pos), int(has_gauss), float(cached)],
        "python": [int(version), list(internal), gauss],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _set_rng_states(states: dict[str, Any]) -> None:
    import random

    import numpy as np

    torch.set_rng_state(states["torch"])
    kind, keys, pos, has_gauss, cached = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
