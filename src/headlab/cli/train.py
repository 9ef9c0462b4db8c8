"""`headlab-train [overrides]`: train one experiment and write the run-output contract.

`train(cfg)` only wires (so tests and sweeps call it with a composed config): the pieces live in
`headlab.run` (resume, config history, the run record, CSV rows, evaluation), `headlab.lit`
(module, checkpoints, signals) and `headlab.lit.loggers`. `main` is the thin wrapper behind the
console script and `python -m headlab.cli.train`; its exit codes are in docs/troubleshooting.md.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from headlab.config.overrides import check_overrides
from headlab.config.validate import validate_config
from headlab.run.info import configure_cache_dirs, default_log_dir
from headlab.run.job import setup_job
from headlab.errors import ConfigError, HeadlabError
from headlab.run.rank import is_rank_zero
from headlab.run.record import RunRecord, existing_last_checkpoint

log = logging.getLogger("headlab.train")

EXIT_CONFIG, EXIT_DIVERGED = 2, 3


def train(cfg: DictConfig) -> dict[str, Any]:
    """Fit, validate and test one configuration; returns the summary written to `summary.json`."""
    run_dir = Path(cfg.paths.output_dir)
    configure_cache_dirs(Path(cfg.paths.log_dir))
    from headlab.run.history import restore_first_hydra
    from headlab.run.resume import finished_run

    done = finished_run(cfg, run_dir)
    if done is not None:  # resume=auto on a run completed with these settings: nothing to do
        restore_first_hydra(run_dir)  # Hydra rewrote .hydra/ for this launch
        log.info("%s: completed already with these settings (resume=auto): not trained again", run_dir)
        return done
    with RunRecord(cfg, run_dir) as record:
        validate_config(cfg)  # before data, imports or files: a typo costs milliseconds
        setup_job(cfg)
        import lightning as L  # heavy imports after the config checks

        from headlab.lit.loggers import build_loggers, closing_wandb, log_config
        from headlab.lit.checkpointing import AtomicCheckpointIO, RunInterrupted
        from headlab.lit.signals import RunSignals
        from headlab.run.build import build_callbacks, build_module, instantiate
        from headlab.run.csv_metrics import keep_csv_rows
        from headlab.run.resume import find_resume
        from headlab.run.summary import evaluate_best, last_state

        resume = find_resume(cfg, run_dir)  # refuses a changed model or settings before anything is rewritten
        record.start(resume)
        with RunSignals() as signals, closing_wandb(), keep_csv_rows(run_dir, resume.step if resume and is_rank_zero() else None):
            L.seed_everything(cfg.seed, workers=True)
            datamodule = instantiate(cfg.data)
            datamodule.setup("fit")
            module = build_module(cfg, datamodule)
            if resume:
                resume.check_data_shape(module.net.config)
            if is_rank_zero():
                datamodule.tokenizer.save(run_dir / "vocab.json")
            loggers = build_loggers(cfg, run_dir.name)
            record.trainer = trainer = instantiate(cfg.trainer, callbacks=build_callbacks(cfg, run_dir, signals),
                                                   logger=loggers or False, plugins=[AtomicCheckpointIO()])
            log_config(loggers, cfg)
            trainer.fit(module, datamodule=datamodule, ckpt_path=resume.path if resume else None, weights_only=True)
            last = existing_last_checkpoint(run_dir)
            if signals.requested:  # the signal came after the last training step
                raise RunInterrupted(signals.requested, int(trainer.global_step), last)
            record.summary["last"] = last_state(trainer, last)
            record.complete(evaluate_best(cfg, trainer, module, datamodule))
    return record.summary


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
        from headlab.lit import NonFiniteLossError  # Lightning-heavy: imported only once train() got that far
        from headlab.lit.signals import RunInterrupted

        if isinstance(err, RunInterrupted):  # SIGTERM / Ctrl-C: stop this job and any sweep around it
            print(f"headlab-train: {err}; continue with: headlab-train resume=true "
                  f"hydra.run.dir={cfg.paths.output_dir} (and the same overrides)", file=sys.stderr)
            sys.exit(err.exit_code)
        if not isinstance(err, NonFiniteLossError):
            raise
        _fail(err, multirun, "diverged", EXIT_DIVERGED)
    if is_rank_zero():  # one line from a DDP run, not one per rank
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
    # The checks import Lightning, and torchmetrics imports matplotlib: point its cache (and
    # W&B's) under the log folder first, so nothing is written to the home directory.
    configure_cache_dirs(_log_dir_from(sys.argv[1:]))
    try:
        check_overrides(sys.argv[1:])  # group options, unknown keys, grammar: before Hydra starts
    except ConfigError as err:
        print(f"headlab-train: error: {err}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    _hydra_main()


def _log_dir_from(args: list[str]) -> Path:
    """`paths.log_dir` as the command line or HEADLAB_LOG_DIR sets it (conf/paths/default.yaml's rule),
    known before Hydra composes anything."""
    for arg in reversed(args):
        if arg.startswith("paths.log_dir="):
            return Path(arg.split("=", 1)[1])
    return default_log_dir()


if __name__ == "__main__":
    main()
