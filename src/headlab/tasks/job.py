"""Per-job process setup that `train()` does first: the run mode fits the config (a `sweep=` needs
`-m`; DDP needs a launcher that gives it its ranks), then torch's threads from the job's own config.

joblib reuses a worker process for several jobs, so every job sets its own thread count instead of
relying on what an earlier job in the same process left behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig

from headlab.errors import ConfigError
from headlab.tasks.threads import set_torch_threads


def setup_job(cfg: DictConfig) -> int:
    """Check the run mode against `sweep=`, one console line per log record, set torch's threads from
    `cfg.threads`; returns the count."""
    one_line_per_record()
    quiet_known_warnings()
    _check_sweep_mode()
    _check_ddp_in_multirun(cfg)
    return set_torch_threads(cfg.get("threads"), _launcher_config())


LIGHTNING_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric")


def one_line_per_record() -> None:
    """Lightning gives its loggers console handlers of their own when imported ("INFO: Seed set to 42"),
    and its records also reach the root logger, which Hydra's job_logging gives a console handler
    ("[time][lightning...][INFO] - Seed set to 42"): every line printed twice. Where the root logger has
    handlers (a Hydra job), Lightning's own go and its records take the root's format (console and
    train.log); a plain Python session keeps Lightning's."""
    import logging

    import lightning  # noqa: F401 - its import adds the handlers removed here

    if not logging.getLogger().handlers:
        return
    for name in LIGHTNING_LOGGERS:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            if type(handler) is logging.StreamHandler:  # Lightning's console handlers (not a test's or a user's file)
                logger.removeHandler(handler)
        logger.propagate = True


# Warnings a user can do nothing about, printed on every run: Lightning calling a torch API torch has
# deprecated, and the CSV logger seeing the run dir Hydra already wrote .hydra/ and train.log into (its
# rows across a resume are kept by headlab.tasks.csv_metrics).
KNOWN_WARNINGS = (r"`isinstance\(treespec, LeafSpec\)` is deprecated",
                  r"Experiment logs directory .* exists and is not empty")


def quiet_known_warnings() -> None:
    import warnings

    for message in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=message)


def _launcher_config() -> Mapping[str, Any] | None:
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    return HydraConfig.get().get("launcher")


def _check_sweep_mode() -> None:
    """A `sweep=` config outside `-m` would silently train one run of the base config."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return
    hydra_cfg = HydraConfig.get()
    sweep = (hydra_cfg.runtime.get("choices") or {}).get("sweep")
    if sweep is not None and hydra_cfg.mode != RunMode.MULTIRUN:
        raise ConfigError("sweep", sweep, f"a multirun: headlab-train -m sweep={sweep} (without -m Hydra ignores "
                          "the sweep's grid and would train a single run)")


def _check_ddp_in_multirun(cfg: DictConfig) -> None:
    """Lightning re-launches a DDP run's command per device into the *single-run* directory
    (`hydra.run.dir`), so in a multirun on this machine the extra ranks would train elsewhere.
    Under SLURM the ranks come from SLURM's tasks instead (the `slurm` launcher), which works."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    strategy = str((cfg.get("trainer") or {}).get("strategy") or "auto")
    if not strategy.startswith("ddp") or not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return
    launcher = str((HydraConfig.get().get("launcher") or {}).get("_target_") or "")
    if "Slurm" not in launcher:
        raise ConfigError("trainer.strategy", strategy, "auto in a multirun on this machine (DDP re-launches into the "
                          "single-run directory); train DDP runs one at a time, or sweep them with hydra/launcher=slurm")
