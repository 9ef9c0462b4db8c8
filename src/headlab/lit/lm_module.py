"""LightningModule that trains a `HeadlabLM` on the next token at every position (`task=lm`).

Same constructor, optimiser groups, scheduler, checkpoint RNG handling and non-finite guard as
`HeadClassifierModule` (it inherits them); only the network and the loss differ. It logs
`train/loss`, and `val/loss`, `val/acc` (next-token accuracy), `test/...` alike, so the run
contract's best checkpoint (by `val/acc`) and summary keys mean the same thing for an LM.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F

from headlab.lit.module import HeadClassifierModule, NonFiniteLossError, _factory, describe
from headlab.model.lm import HeadlabLM, LMConfig


class CausalLMModule(HeadClassifierModule):
    """Causal next-token training of a head-measurable attention LM (see `HeadClassifierModule` for the args)."""

    def __init__(self, model_config: LMConfig | Mapping[str, Any],
                 optimizer: Callable[..., torch.optim.Optimizer] | Mapping[str, Any] | None = None,
                 scheduler: Callable[..., Any] | Mapping[str, Any] | None = None, compile: bool = False) -> None:
        L.LightningModule.__init__(self)
        if not isinstance(model_config, LMConfig):
            model_config = LMConfig(**model_config)
        self.optimizer_factory, self.scheduler_factory = _factory(optimizer), _factory(scheduler)
        self.save_hyperparameters({"model_config": asdict(model_config), "optimizer": describe(self.optimizer_factory),
                                   "scheduler": describe(self.scheduler_factory), "compile": bool(compile)})
        self.net = HeadlabLM(model_config)
        self._train_forward = torch.compile(self.net) if compile else self.net
        self._eval_sums: dict[str, torch.Tensor] = {}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.net(input_ids, attention_mask).logits

    @staticmethod
    def next_token_loss(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of predicting token t+1 at every position t."""
        return F.cross_entropy(logits[:, :-1].flatten(0, 1), input_ids[:, 1:].flatten())

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.next_token_loss(self._train_forward(batch["input_ids"]).logits, batch["input_ids"])
        if not torch.isfinite(loss):
            raise NonFiniteLossError(self.global_step, float(loss))
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["input_ids"].size(0))
        return loss

    def on_train_epoch_end(self) -> None:
        pass

    def _eval_step(self, batch: dict[str, torch.Tensor], metrics: Any, stage: str) -> None:
        tokens = batch["input_ids"]
        logits = self.net(tokens).logits[:, :-1]
        loss = F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten(), reduction="sum")
        correct = (logits.argmax(-1) == tokens[:, 1:]).sum()
        sums = torch.stack([loss.detach().double(), correct.double(), torch.tensor(float(tokens[:, 1:].numel()))])
        self._eval_sums[stage] = sums if stage not in self._eval_sums else self._eval_sums[stage] + sums

    def _log_eval(self, stage: str) -> None:
        loss, correct, count = self._eval_sums.pop(stage).tolist()
        self.log_dict({f"{stage}/loss": loss / count, f"{stage}/acc": correct / count}, prog_bar=stage == "val")

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._eval_step(batch, None, "val")

    def on_validation_epoch_end(self) -> None:
        self._log_eval("val")

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._eval_step(batch, None, "test")

    def on_test_epoch_end(self) -> None:
        self._log_eval("test")
