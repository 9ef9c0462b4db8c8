"""`headlab-train [overrides]`: train one experiment and write the run-output contract.

`train(cfg)` only instantiates and wires (so tests and sweeps call it with a composed config);
`main` is the thin Hydra wrapper behind the console script and `python -m headlab.cli.train`.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from headlab.cli.run_info import (
    config_digest,
    configure_cache_dirs,
    job_overrides,
    swept_values,
    write_summary,
)
from headlab.errors import ConfigError, HeadlabError
from headlab.store import atomic_write_with

log = logging.getLogger("headlab.train")


def train(cfg: DictConfig) -> dict[str, Any]:
    """Fit, validate and test one configuration; returns the summary written to `summary.json`."""
    output_dir = Path(cfg.paths.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    configure_cache_dirs(Path(cfg.paths.log_dir))
    model_fields = _model_fields(cfg)
    _validate_early(cfg, model_fields)

    import lightning as L  # heavy imports after the config checks, so mistakes fail fast

    from headlab.lit import HeadClassifierModule, NonFiniteLossError
    from headlab.model import ModelConfig

    started = time.perf_counter()
    summary: dict[str, Any] = {"status": "running", "run_id": output_dir.name, "run_dir": str(output_dir.resolve()),
                               "config_digest": config_digest(cfg),
                               "overrides": job_overrides(), "swept": swept_values(cfg)}
    write_summary(output_dir, summary)
    trainer, csv_before_resume = None, None
    try:
        L.seed_everything(cfg.seed, workers=True)
        datamodule = _instantiate(cfg.data)
        datamodule.setup("fit")
        datamodule.tokenizer.save(output_dir / "vocab.json")
        model_config = ModelConfig(vocab_size=datamodule.vocab_size, n_classes=datamodule.n_classes,
                                   max_len=int(cfg.data.max_len), **model_fields)
        module = HeadClassifierModule(model_config, compile=bool(cfg.model.compile), **OmegaConf.to_container(cfg.optim))
        callbacks = _instantiate_all(cfg.get("callbacks"))
        ckpt_path = _resume_checkpoint(cfg, output_dir)
        csv_before_resume = _stash_csv_metrics(output_dir, ckpt_path)
        loggers = _build_loggers(cfg, output_dir.name)
        trainer = _instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
        for logger in loggers:
            logger.log_hyperparams(_flat_config(cfg))
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
        summary.update(_evaluate(cfg, trainer, module, datamodule))
        summary["status"] = "completed"
    except NonFiniteLossError as err:
        summary.update(status="diverged", error=str(err), diverged_step=err.step)
        raise
    except BaseException as err:
        summary.update(status="interrupted" if isinstance(err, KeyboardInterrupt) else "failed", error=str(err))
        raise
    finally:
        if csv_before_resume is not None:
            _restore_csv_metrics(output_dir, csv_before_resume)
        summary.update(_run_facts(trainer, started))
        write_summary(output_dir, summary)
        _finish_wandb()
    return summary


def _model_fields(cfg: DictConfig) -> dict[str, Any]:
    fields = OmegaConf.to_container(cfg.model, resolve=True)
    fields.pop("compile", None)
    return fields


def _validate_early(cfg: DictConfig, model_fields: dict[str, Any]) -> None:
    """Check what can be checked before data loading, so a typo costs milliseconds."""
    from headlab.model import ModelConfig

    max_len = cfg.data.get("max_len")
    if not isinstance(max_len, int) or max_len < 2:
        raise ConfigError("data.max_len", max_len, "an integer >= 2")
    ModelConfig(vocab_size=4, n_classes=2, max_len=max_len, **model_fields)
    if not isinstance(cfg.seed, int) or cfg.seed < 0:
        raise ConfigError("seed", cfg.seed, "an integer >= 0")
    lr = cfg.optim.get("lr")
    if not isinstance(lr, (int, float)) or lr <= 0:
        raise ConfigError("optim.lr", lr, "a learning rate > 0")
    max_epochs, max_steps = cfg.trainer.get("max_epochs"), cfg.trainer.get("max_steps", -1)
    if max_steps in (-1, None) and isinstance(max_epochs, int) and max_epochs < 1:
        raise ConfigError("trainer.max_epochs", max_epochs, "an integer >= 1 (or set trainer.max_steps)")


def _instantiate(node: DictConfig, **kwargs: Any) -> Any:
    """`hydra.utils.instantiate`, but a headlab error inside comes out as itself, not wrapped."""
    from hydra.errors import InstantiationException

    try:
        return hydra.utils.instantiate(node, **kwargs)
    except InstantiationException as err:
        cause = err.__cause__
        while cause is not None and not isinstance(cause, HeadlabError):
            cause = cause.__cause__
        if cause is None:
            raise
        raise cause from None


def _instantiate_all(group: DictConfig | None) -> list[Any]:
    if not group:
        return []
    return [_instantiate(node) for node in group.values() if node is not None and "_target_" in node]


def _build_loggers(cfg: DictConfig, run_id: str) -> list[Any]:
    """Instantiate the configured loggers; W&B gets its group / job_type / name from the run."""
    loggers = []
    for key, node in (cfg.get("logger") or {}).items():
        if node is None or "_target_" not in node:
            continue
        kwargs: dict[str, Any] = {}
        if node._target_.endswith("WandbLogger"):
            kwargs = {"name": node.get("name") or run_id, "group": node.get("group") or cfg.get("sweep_name") or _sweep_group(),
                      "job_type": node.get("job_type") or job_overrides(exclude=("seed",)) or "default"}
            if node.get("offline", True):
                os.environ.setdefault("WANDB_MODE", "offline")
        loggers.append(_instantiate(node, **kwargs))
    return loggers


def _sweep_group() -> str:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        return Path(HydraConfig.get().sweep.dir).name
    return "single"


def _resume_checkpoint(cfg: DictConfig, output_dir: Path) -> str | None:
    if not cfg.get("resume"):
        return None
    last = output_dir / "checkpoints" / "last.ckpt"
    if not last.is_file():
        raise ConfigError("resume", True, f"a run dir with checkpoints/last.ckpt; {last} does not exist "
                          "(point hydra.run.dir at the run to continue)")
    return str(last)


def _stash_csv_metrics(output_dir: Path, ckpt_path: str | None) -> Path | None:
    """Keep the CSV rows logged up to the checkpoint: Lightning's CSV logger deletes an existing
    metrics.csv when it starts, which would lose everything logged before the restart."""
    metrics = output_dir / "metrics.csv"
    if ckpt_path is None or not metrics.is_file():
        return None
    import pandas as pd
    import torch

    step = torch.load(ckpt_path, map_location="cpu", weights_only=True)["global_step"]
    rows = pd.read_csv(metrics)
    stash = output_dir / f".metrics.before-step{step}.csv"
    atomic_write_with(stash, lambda tmp: rows[rows["step"] <= step].to_csv(tmp, index=False))
    return stash


def _restore_csv_metrics(output_dir: Path, stash: Path) -> None:
    """metrics.csv = rows from before the restart + rows logged since, under one header."""
    import pandas as pd

    parts = [pd.read_csv(stash)]
    if (output_dir / "metrics.csv").is_file():
        parts.append(pd.read_csv(output_dir / "metrics.csv"))
    merged = pd.concat(parts, ignore_index=True)
    atomic_write_with(output_dir / "metrics.csv", lambda tmp: merged.to_csv(tmp, index=False))
    stash.unlink()


def _evaluate(cfg: DictConfig, trainer: Any, module: Any, datamodule: Any) -> dict[str, Any]:
    """Validation (and test) metrics of the best checkpoint, plus where it was found."""
    ckpt = getattr(trainer.checkpoint_callback, "best_model_path", "") or None
    result: dict[str, Any] = {"best_checkpoint": ckpt, "best_step": _step_from_checkpoint(ckpt)}
    val = trainer.validate(module, datamodule=datamodule, ckpt_path=ckpt, verbose=False)[0]
    result.update(val_acc=val.get("val/acc"), val_f1=val.get("val/f1"), val_loss=val.get("val/loss"))
    if cfg.get("test", True):
        test = trainer.test(module, datamodule=datamodule, ckpt_path=ckpt, verbose=False)[0]
        result.update(test_acc=test.get("test/acc"), test_f1=test.get("test/f1"), test_loss=test.get("test/loss"))
    return result


def _step_from_checkpoint(path: str | None) -> int | None:
    match = re.search(r"step(\d+)", Path(path).name) if path else None
    return int(match.group(1)) if match else None


def _run_facts(trainer: Any, started: float) -> dict[str, Any]:
    facts: dict[str, Any] = {"wall_s": round(time.perf_counter() - started, 3)}
    if trainer is None:
        return facts
    facts["global_step"] = int(trainer.global_step)
    facts["epochs"] = int(trainer.current_epoch)
    module, datamodule = trainer.lightning_module, trainer.datamodule
    if datamodule is not None and hasattr(datamodule, "stats"):
        facts["data"] = datamodule.stats
        facts["probe_digest"] = datamodule.stats.get("probe_digest")
    if module is not None:
        from headlab.model import count_parameters

        facts["n_params"] = count_parameters(module.net, non_embedding=False)
        facts["n_params_non_embedding"] = count_parameters(module.net, non_embedding=True)
        facts["head_dim"] = module.net.config.head_dim
    for callback in trainer.callbacks:
        timing = getattr(callback, "timing", None)
        if timing is not None:
            facts.update(measure_s=round(timing.capture_s + timing.metrics_s, 3), measure_capture_s=round(timing.capture_s, 3),
                         measure_metrics_s=round(timing.metrics_s, 3), n_measurements=timing.n)
            if callback.last_measurement is not None:
                facts["final_roles"] = callback.last_measurement.roles
    return facts


def _flat_config(cfg: DictConfig) -> dict[str, Any]:
    container = OmegaConf.to_container(cfg, resolve=True)
    container.pop("paths", None)
    return container


def _finish_wandb() -> None:
    """Close this job's W&B run, so the next multirun job starts its own."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.finish()


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def _hydra_main(cfg: DictConfig) -> float | None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    try:
        summary = train(cfg)
    except HeadlabError as err:
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            log.error("%s", err)
            raise  # recorded as a failed job; the other jobs go on
        print(f"headlab-train: error: {err}", file=sys.stderr)
        sys.exit(2)
    print(summary.get("run_dir", cfg.paths.output_dir))
    return summary.get("val_acc")


def main() -> None:
    _hydra_main()


if __name__ == "__main__":
    main()
