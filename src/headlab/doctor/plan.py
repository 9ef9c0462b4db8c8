"""The doctor before training: the checks that need only the config (warm-up for the lr, head
width), on a composed config; the others say they need a run."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from headlab.doctor.checks import NOT_MEASURED, Finding, RunTables, Thresholds, check_head_width, check_warmup, run_checks
from headlab.doctor.report import Diagnosis
from headlab.errors import ConfigError

CONFIG_CHECKS = (check_warmup, check_head_width)
# The config keys those checks read (dotted), taken from the composed config one by one.
CONFIG_KEYS = ("optim.lr", "optim.warmup_ratio", "optim.warmup_steps", "optim.schedule", "optim.optimizer._target_",
               "model.d_model", "model.n_heads", "model.d_head", "model.n_layers", "model.init_scale", "trainer.max_steps")


def config_tables(values: Mapping[str, Any]) -> RunTables:
    """RunTables of a run not started yet: `values` maps CONFIG_KEYS to the composed config's values."""
    swept = {k: v for k, v in values.items() if k in CONFIG_KEYS and k != "optim.optimizer._target_"}
    max_steps = values.get("trainer.max_steps")
    summary = {"status": "planned", "swept": swept,
               "global_step": max_steps if isinstance(max_steps, int) and max_steps > 0 else None}
    config = {"optim": {"optimizer": {"_target_": values.get("optim.optimizer._target_")}}}
    return RunTables(summary=summary, config=config)


def plan_checks(tables: RunTables, thresholds: Thresholds | None = None) -> list[Finding]:
    """The config checks' findings, and "not measured" for the ones that read a run's tables."""
    t = thresholds or Thresholds()
    done = {check.__name__: check(tables, t) for check in CONFIG_CHECKS}
    names = [f.check for f in run_checks(RunTables(summary={"status": "completed"}), t)]
    by_name = {f.check: f for f in done.values()}
    return [by_name.get(n) or Finding(n, NOT_MEASURED, "no run yet: train, then headlab-doctor RUN_DIR") for n in names]


def diagnose_plan(overrides: list[str], validate: Callable[[Any], None]):
    """The Diagnosis of the config `headlab-train overrides...` would run, composed and checked by
    `validate` (headlab-train's own check of a composed config: a ConfigError when it would refuse
    them; passed in, as it belongs to the command); nothing is written."""
    from pathlib import Path

    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        if GlobalHydra.instance().is_initialized():  # called from a Hydra app (headlab-doctor): its search path
            cfg = compose("train", overrides=list(overrides))
        else:
            with initialize_config_module("headlab.conf", version_base="1.3"):
                cfg = compose("train", overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as err:
        raise ConfigError("overrides", " ".join(overrides), f"overrides that compose: {str(err).splitlines()[0]}") from err
    validate(cfg)
    values = {key: OmegaConf.select(cfg, key, throw_on_resolution_failure=False) for key in CONFIG_KEYS}
    return Diagnosis(Path("(config: " + " ".join(overrides) + ")"), plan_checks(config_tables(values)))
