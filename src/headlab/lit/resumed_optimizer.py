"""A resumed run trains with the optimiser settings of its config, not of its checkpoint.

Lightning restores the optimiser's and scheduler's state dicts after `configure_optimizers`, and
those carry the hyper-parameters of the first start (lr, weight decay, betas, ...). So a resume
with `optim.lr=5e-4 resume_allow=[optim.lr]` would silently keep the old learning rate. This
callback remembers the hyper-parameters the current config built (at `on_fit_start`, before the
restore) and puts them back after it (`on_train_start`), keeping the restored moments and step
counts; the scheduler's base rates follow, and the current rate is recomputed at the resumed step.
Without a resume, or with unchanged settings, it changes nothing.
"""

from __future__ import annotations

from typing import Any

import lightning as L

_STATE_KEYS = ("params",)  # what a param group holds that is not a hyper-parameter


class ResumedOptimizerSettings(L.Callback):
    def __init__(self) -> None:
        super().__init__()
        self._configured: list[list[dict[str, Any]]] = []

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._configured = [[{k: v for k, v in group.items() if k not in _STATE_KEYS} for group in opt.param_groups]
                            for opt in trainer.optimizers]

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.ckpt_path is None or not self._configured:
            return
        scheduled = bool(trainer.lr_scheduler_configs)  # then the scheduler sets lr, below
        for optimizer, configured in zip(trainer.optimizers, self._configured):
            for group, settings in zip(optimizer.param_groups, configured):
                group.update({k: v for k, v in settings.items() if not (scheduled and k == "lr")})
                group["initial_lr"] = settings.get("initial_lr", settings["lr"])
        for config in trainer.lr_scheduler_configs:
            scheduler = config.scheduler
            groups = scheduler.optimizer.param_groups
            scheduler.base_lrs = [group["initial_lr"] for group in groups]
            lambdas = getattr(scheduler, "lr_lambdas", None)
            if lambdas is not None:  # LambdaLR (headlab's WarmupSchedule): the rate at the resumed step
                for group, base, factor in zip(groups, scheduler.base_lrs, lambdas):
                    group["lr"] = base * factor(scheduler.last_epoch)
                scheduler._last_lr = [group["lr"] for group in groups]
