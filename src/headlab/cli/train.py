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

from headlab.cli.job import setup_job
from headlab.cli.run_info import (
    SWEPT_KEYS,
    config_digest,
    configure_cache_dirs,
    job_override_list,
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
    setup_job(cfg)  # a sweep= config needs -m; torch threads of this job from cfg.threads

    import lightning as L  # heavy imports after the config checks, so mistakes fail fast

    from headlab.lit import HeadClassifierModule, NonFiniteLossError
    from headlab.lit.checkpointing import AtomicCheckpointIO, RunCheckpoint, RunInterrupted, run_last_checkpoint
    from headlab.model import ModelConfig

    resume = _resume_checkpoint(cfg, output_dir, model_fields)  # before anything in the run dir is rewritten
    ckpt_path = resume["path"] if resume else None
    started = time.perf_counter()
    summary: dict[str, Any] = {"status": "running", "run_id": output_dir.name, "run_dir": str(output_dir.resolve()),
                               "config_digest": config_digest(cfg),
                               "overrides": job_overrides(), "swept": swept_values(cfg)}
    if resume:
        summary["resumed_from"] = {"step": resume["step"], "previous_status": _previous_status(output_dir)}
    write_summary(output_dir, summary)
    trainer, csv_before_resume, run_checkpoint = None, None, None
    previous_handlers = _raise_on_signals(RunInterrupted)
    try:
        L.seed_everything(cfg.seed, workers=True)
        datamodule = _instantiate(cfg.data)
        datamodule.setup("fit")
        model_config = ModelConfig(vocab_size=datamodule.vocab_size, n_classes=datamodule.n_classes,
                                   max_len=int(cfg.data.max_len), **model_fields)
        if resume:
            _check_resume_shape(resume, model_config)
        datamodule.tokenizer.save(output_dir / "vocab.json")
        module = HeadClassifierModule(model_config, compile=bool(cfg.model.compile), **OmegaConf.to_container(cfg.optim))
        callbacks = _instantiate_all(cfg.get("callbacks"))
        run_checkpoint = next((c for c in callbacks if isinstance(c, RunCheckpoint)), None)
        if run_checkpoint is None:  # signals always end in a checkpoint, whatever the callbacks group says
            run_checkpoint = RunCheckpoint(dirpath=str(run_last_checkpoint(output_dir).parent))
            callbacks.append(run_checkpoint)
        csv_before_resume = _stash_csv_metrics(output_dir, resume)
        loggers = _build_loggers(cfg, output_dir.name)
        trainer = _instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False, plugins=[AtomicCheckpointIO()])
        for logger in loggers:
            logger.log_hyperparams(_flat_config(cfg))
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
        if run_checkpoint.stop_requested:  # the signal came after the last training step
            raise RunInterrupted(run_checkpoint.stop_requested, int(trainer.global_step), _last_checkpoint(output_dir))
        summary.update(_evaluate(cfg, trainer, module, datamodule))
        summary["status"] = "completed"
    except NonFiniteLossError as err:
        summary.update(status="diverged", error=str(err), diverged_step=err.step, last_checkpoint=_last_checkpoint(output_dir))
        raise
    except RunInterrupted as err:
        summary.update(status="interrupted", error=str(err), signal=err.signal_name, last_checkpoint=_last_checkpoint(output_dir))
        raise
    except BaseException as err:
        interrupted = isinstance(err, KeyboardInterrupt)
        summary.update(status="interrupted" if interrupted else "failed", error=str(err) or type(err).__name__,
                       last_checkpoint=_last_checkpoint(output_dir))
        raise
    finally:
        _restore_signals(previous_handlers)
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


# Overrides that do not change the experimental condition: left out of W&B's job_type, so runs
# that differ only in them average together.
_NOT_A_CONDITION = ("seed", "sweep", "logger", "hydra/launcher", "threads", "trainer.enable_progress_bar")
_WANDB_JOB_TYPE_MAX = 64  # W&B rejects longer job types online


def _build_loggers(cfg: DictConfig, run_id: str) -> list[Any]:
    """Instantiate the configured loggers; W&B gets its group / job_type / name from the run."""
    loggers = []
    for key, node in (cfg.get("logger") or {}).items():
        if node is None or "_target_" not in node:
            continue
        kwargs: dict[str, Any] = {}
        if node._target_.endswith("WandbLogger"):
            group = node.get("group") or cfg.get("sweep_name") or _sweep_group()
            # job numbers repeat across sweeps, so a multirun job is named after its group too
            name = node.get("name") or (run_id if group == "single" else f"{group}-{run_id}")
            kwargs = {"name": name, "group": group, "job_type": node.get("job_type") or _wandb_job_type()}
            if node.get("offline", True):
                os.environ.setdefault("WANDB_MODE", "offline")
        loggers.append(_instantiate(node, **kwargs))
    return loggers


def _wandb_job_type() -> str:
    """The job's condition: overrides without the seed, swept keys first, so that a cut to W&B's
    64 characters keeps what tells configs apart (a digest of the whole keeps cut ones distinct)."""
    import hashlib

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


def _resume_checkpoint(cfg: DictConfig, output_dir: Path, model_fields: dict[str, Any]) -> dict[str, Any] | None:
    """`resume=true`: the run dir's last.ckpt, read safely and checked against this config's model.
    `resume=auto`: the same when last.ckpt exists, else a fresh start (for requeued jobs)."""
    value = cfg.get("resume")
    if value in (False, None):
        return None
    if value not in (True, "auto"):
        raise ConfigError("resume", value, "true, false or auto")
    from headlab.lit.checkpointing import load_checkpoint, run_last_checkpoint, saved_model_config

    last = run_last_checkpoint(output_dir)
    if not last.is_file():
        if value == "auto":
            return None
        raise ConfigError("resume", True, f"a run dir with checkpoints/last.ckpt; {last} does not exist "
                          "(point hydra.run.dir at the run to continue)")
    checkpoint = load_checkpoint(last, mmap=True)  # only its metadata here: fit reads the weights
    saved = saved_model_config(checkpoint, last)
    differ = {k: (saved.get(k), v) for k, v in model_fields.items() if k in saved and saved.get(k) != v}
    if differ:
        _raise_shape_mismatch(last, differ)
    return {"path": str(last), "step": int(checkpoint.get("global_step", 0)), "model_config": saved}


def _check_resume_shape(resume: dict[str, Any], model_config: Any) -> None:
    """The data-dependent sizes (vocabulary, classes, max_len) must match the checkpoint too."""
    saved = resume["model_config"]
    differ = {k: (saved.get(k), getattr(model_config, k)) for k in ("vocab_size", "n_classes", "max_len")
              if saved.get(k) != getattr(model_config, k)}
    if differ:
        _raise_shape_mismatch(resume["path"], differ, hint="the data, data.max_len or data.min_freq changed")


def _raise_shape_mismatch(path: Any, differ: dict[str, tuple[Any, Any]], hint: str | None = None) -> None:
    first, (old, new) = next(iter(differ.items()))
    key = first if first in ("vocab_size", "n_classes") else ("data.max_len" if first == "max_len" else f"model.{first}")
    diffs = ", ".join(f"{k}: checkpoint {a!r} vs config {b!r}" for k, (a, b) in differ.items())
    raise ConfigError(key, new, f"the value the resumed checkpoint {path} was trained with ({diffs}); "
                      f"{hint or 'resume with the original model overrides, or start a new run'}")


def _previous_status(output_dir: Path) -> str | None:
    import json

    try:
        return json.loads((output_dir / "summary.json").read_text(encoding="utf-8")).get("status")
    except (OSError, ValueError, AttributeError):
        return None


def _last_checkpoint(output_dir: Path) -> str | None:
    from headlab.lit.checkpointing import run_last_checkpoint

    last = run_last_checkpoint(output_dir)
    return str(last) if last.is_file() else None


def _raise_on_signals(exception: type) -> dict[int, Any]:
    """Until fit takes over: SIGTERM / SIGINT raise `exception` (a normal Exception), so the run
    still writes summary.json with status "interrupted" (and Lightning does not turn Ctrl-C into exit 1)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}

    def handler(signum: int, frame: Any) -> None:
        raise exception(signal.Signals(signum).name)

    previous = {}
    for signum in (signal.SIGTERM, signal.SIGINT):
        previous[signum] = signal.getsignal(signum)
        signal.signal(signum, handler)
    return previous


def _restore_signals(previous: dict[int, Any]) -> None:
    import signal

    for signum, handler in previous.items():
        signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def _stash_csv_metrics(output_dir: Path, resume: dict[str, Any] | None) -> Path | None:
    """Keep the CSV rows logged up to the checkpoint: Lightning's CSV logger deletes an existing
    metrics.csv when it starts, which would lose everything logged before the restart. A file cut
    short by a kill keeps the rows that parse."""
    metrics = output_dir / "metrics.csv"
    if resume is None or not metrics.is_file():
        return None
    import pandas as pd

    step = resume["step"]
    try:
        rows = pd.read_csv(metrics, on_bad_lines="skip")
    except (ValueError, pd.errors.ParserError) as err:  # empty or unreadable: nothing to keep
        log.warning("%s unreadable (%s): starting it afresh", metrics, err)
        return None
    rows = rows[pd.to_numeric(rows.get("step"), errors="coerce") <= step] if "step" in rows else rows.iloc[0:0]
    stash = output_dir / f".metrics.before-step{step}.csv"
    atomic_write_with(stash, lambda tmp: rows.to_csv(tmp, index=False))
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
    val = trainer.validate(module, datamodule=datamodule, ckpt_path=ckpt, verbose=False, weights_only=True)[0]
    result.update(val_acc=val.get("val/acc"), val_f1=val.get("val/f1"), val_loss=val.get("val/loss"))
    if cfg.get("test", True):
        test = trainer.test(module, datamodule=datamodule, ckpt_path=ckpt, verbose=False, weights_only=True)[0]
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
                         measure_metrics_s=round(timing.metrics_s, 3), n_measurements=timing.n,
                         head_metrics_s=round(timing.hooks_s, 3), head_metrics_grad_norm_s=round(timing.grad_norm_s, 3),
                         head_metrics_write_s=round(timing.write_s, 3), figures_s=round(timing.figures_s, 3))
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


# Exit codes of `headlab-train` (README "When things go wrong").
EXIT_CONFIG, EXIT_DIVERGED = 2, 3


@hydra.main(version_base="1.3", config_path="pkg://headlab.conf", config_name="train")
def _hydra_main(cfg: DictConfig) -> float | None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    configure_cache_dirs(Path(cfg.paths.log_dir))  # before anything imports matplotlib or wandb
    multirun = HydraConfig.get().mode == RunMode.MULTIRUN
    try:
        summary = train(cfg)
    except HeadlabError as err:
        _fail(err, multirun, "error", EXIT_CONFIG)
    except Exception as err:
        # Lightning-heavy types, imported only once train() got that far: config errors stay fast.
        from headlab.lit import NonFiniteLossError
        from headlab.lit.checkpointing import RunInterrupted

        if isinstance(err, RunInterrupted):  # SIGTERM / Ctrl-C: stop this job and any sweep around it
            print(f"headlab-train: {err}; continue with: headlab-train resume=true "
                  f"hydra.run.dir={cfg.paths.output_dir} (and the same overrides)", file=sys.stderr)
            sys.exit(err.exit_code)
        if not isinstance(err, NonFiniteLossError):
            raise
        _fail(err, multirun, "diverged", EXIT_DIVERGED)
    print(summary.get("run_dir", cfg.paths.output_dir))
    return summary.get("val_acc")


def _fail(err: Exception, multirun: bool, kind: str, code: int) -> None:
    """One stderr line and an exit code; in a multirun, re-raise so Hydra records the job as
    failed, runs the remaining jobs, then exits 1."""
    if multirun:
        log.error("%s", err)
        raise err
    print(f"headlab-train: {kind}: {err}", file=sys.stderr)
    sys.exit(code)


def main() -> None:
    try:
        _check_group_choices(sys.argv[1:])
    except ConfigError as err:
        print(f"headlab-train: error: {err}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    _hydra_main()


def _check_group_choices(args: list[str]) -> None:
    """`data=foo`, `logger=foo`, `hydra/launcher=foo`: one line naming the group, the value and the
    options, instead of Hydra's multi-line "Could not find 'data/foo'" report."""
    overrides = [a for a in args if "=" in a and not a.startswith("-")]
    candidates = []
    for override in overrides:
        key, _, value = override.partition("=")
        key = key.lstrip("+~")
        if "." in key or "@" in key or not value or any(ch in value for ch in "([{$"):
            continue  # a value override, a package override, a list or sweep syntax: left to Hydra
        candidates.append((key, value))
    if not candidates or any(a.split("=")[0] in ("--config-dir", "-cd") for a in args):
        return  # a user's --config-dir adds options this check cannot see: Hydra reports those
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    # train.yaml's hydra.searchpath (HEADLAB_CONFIG_DIR) or its override adds the user's groups
    searchpath = [o for o in overrides if o.startswith("hydra.searchpath=")]
    with initialize_config_module("headlab.conf", version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        for key, value in candidates:
            options = loader.get_group_options(key, config_name="train", overrides=searchpath)
            if not options:
                continue  # not a config group
            for choice in value.split(","):
                if choice not in options and choice != "null":
                    raise ConfigError(key, choice, f"one of {', '.join(sorted(options))} (the config group {key}/)")


if __name__ == "__main__":
    main()
