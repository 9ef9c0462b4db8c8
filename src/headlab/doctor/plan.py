"""The doctor before training: the checks that need only the config (warm-up for the lr, head
width), on a composed config; the others say they need a run."""

from __future__ import annotations

from typing import Any, Mapping

from headlab.doctor.checks import NOT_MEASURED, Finding, RunTables, Thresholds, check_head_width, check_warmup, run_checks
from headlab.doctor.report import Diagnosis

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


def diagnose_plan(cfg: Any, overrides: list[str]) -> Diagnosis:
    """The Diagnosis of the config `headlab-train overrides...` would run (`cfg`, composed and checked by
    the command); nothing is written."""
    from pathlib import Path

    from omegaconf import OmegaConf

    values = {key: OmegaConf.select(cfg, key, throw_on_resolution_failure=False) for key in CONFIG_KEYS}
    return Diagnosis(Path("(config: " + " ".join(overrides) + ")"), plan_checks(config_tables(values)))
