"""Build a run's objects from the composed config: Hydra instantiates, headlab errors stay themselves.

The LightningModule gets its network config (`model/`, with `vocab_size`, `n_classes` from the
data), its `_partial_` optimiser and scheduler factory (`optim/`) and `compile` (`module`); the
callbacks always include one `RunCheckpoint`, after every `ModelCheckpoint`, sharing the run's signals,
and `ResumedOptimizerSettings`, so a resume trains with the optimiser settings of its config.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from headlab.config import instantiate
from headlab.store import RunDir


def build_module(cfg: DictConfig, datamodule: Any) -> Any:
    """The LightningModule, its network sized by the data."""
    plain = {"_convert_": "all"}  # lists as lists: the optimiser's state goes into checkpoints
    domains = {"n_domains": datamodule.n_domains} if hasattr(datamodule, "n_domains") else {}  # per-domain Q/K/V
    classes = {"n_classes": datamodule.n_classes} if hasattr(datamodule, "n_classes") else {}  # a language model has none
    network = instantiate(cfg.model, vocab_size=datamodule.vocab_size, **classes, **domains, **plain)
    scheduler = instantiate(cfg.optim.scheduler, **plain) if cfg.optim.get("scheduler") is not None else None
    optimizer = instantiate(cfg.optim.optimizer, **plain)
    module = instantiate(cfg.module, _partial_=True, **plain)  # objects are passed to it, not merged into its config
    return module(model_config=network, optimizer=optimizer, scheduler=scheduler)


def build_callbacks(cfg: DictConfig, run: RunDir, signals: Any, run_id: str | None = None) -> list[Any]:
    """The `callbacks/` group, with the run's `RunCheckpoint` last (signals always end in a checkpoint);
    `run_id` (the run record's, kept from the first start) goes to every callback that writes rows without one."""
    from headlab.lit.checkpointing import RunCheckpoint  # Lightning: imported when training starts, not with tasks/

    group = cfg.get("callbacks") or {}
    callbacks = [instantiate(node) for node in group.values() if node is not None and "_target_" in node]
    for callback in callbacks:
        if run_id is not None and getattr(callback, "run_id", "") is None:
            callback.run_id = run_id
    run_checkpoints = [c for c in callbacks if isinstance(c, RunCheckpoint)]
    run_checkpoint = run_checkpoints[0] if run_checkpoints else RunCheckpoint(dirpath=str(run.checkpoints_dir))
    run_checkpoint.use_signals(signals)
    from headlab.lit.resumed_optimizer import ResumedOptimizerSettings  # Lightning, as above

    return [c for c in callbacks if c is not run_checkpoint] + [ResumedOptimizerSettings(), run_checkpoint]
