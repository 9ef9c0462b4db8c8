"""The run's loggers: instantiated from `logger/`, W&B named after the run and its sweep.

W&B: `group` = the sweep (multirun folder name, `sweep_name`, or "single"), `job_type` = the
overrides without the seed (runs that differ only in seed average together), `name` = the run id
(prefixed by the group in a sweep, where job numbers repeat). Offline unless the config opts in.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from headlab.store.run_info import SWEPT_KEYS, job_override_list
from headlab.config import instantiate

# Overrides that do not change the experimental condition: left out of W&B's job_type.
_NOT_A_CONDITION = ("seed", "sweep", "logger", "hydra/launcher", "threads", "trainer.enable_progress_bar")
_WANDB_JOB_TYPE_MAX = 64  # W&B rejects longer job types online


def build_loggers(cfg: DictConfig, run_id: str) -> list[Any]:
    """Instantiate the configured loggers; W&B gets its group / job_type / name from the run."""
    loggers = []
    for node in (cfg.get("logger") or {}).values():
        if node is None or "_target_" not in node:
            continue
        kwargs: dict[str, Any] = {}
        if node._target_.endswith("WandbLogger"):
            group = node.get("group") or cfg.get("sweep_name") or _sweep_group()
            name = node.get("name") or (run_id if group == "single" else f"{group}-{run_id}")
            kwargs = {"name": name, "group": group, "job_type": node.get("job_type") or wandb_job_type()}
            if node.get("offline", True):
                os.environ.setdefault("WANDB_MODE", "offline")
        logger = instantiate(node, **kwargs)
        if node._target_.endswith("WandbLogger"):
            # Lightning always hands wandb.init `anonymous=None`, which wandb >= 0.19 answers with "The anonymous
            # setting has no effect and will be removed" on every run; left out, wandb uses its default.
            init = getattr(logger, "_wandb_init", None)
            if isinstance(init, dict) and init.get("anonymous") is None:
                init.pop("anonymous", None)
        loggers.append(logger)
    return loggers


def log_config(loggers: list[Any], cfg: DictConfig) -> None:
    """The resolved config (without output paths) as every logger's hyper-parameters."""
    container = OmegaConf.to_container(cfg, resolve=True)
    container.pop("paths", None)
    for logger in loggers:
        logger.log_hyperparams(container)


def wandb_job_type() -> str:
    """The job's condition: overrides without the seed, swept keys first, so that a cut to W&B's
    64 characters keeps what tells configs apart (a digest of the whole keeps cut ones distinct)."""
    overrides = job_override_list(exclude=_NOT_A_CONDITION)
    overrides.sort(key=lambda o: o.split("=", 1)[0].lstrip("+~") not in SWEPT_KEYS)
    text = ",".join(overrides) or "default"
    if len(text) <= _WANDB_JOB_TYPE_MAX:
        return text
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:6]
    return f"{text[:_WANDB_JOB_TYPE_MAX - 8]}..{digest}"


def _sweep_group() -> str:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        return Path(HydraConfig.get().sweep.dir).name
    return "single"


@contextlib.contextmanager
def closing_wandb() -> Iterator[None]:
    """Close this job's W&B run on the way out, so the next multirun job starts its own."""
    try:
        yield
    finally:
        wandb = sys.modules.get("wandb")
        if wandb is not None and getattr(wandb, "run", None) is not None:
            wandb.finish()
