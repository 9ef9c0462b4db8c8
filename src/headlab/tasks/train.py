"""One training run from a composed config: fit, validate, test, and write the run-output contract.

`train(cfg)` only wires (so `headlab-train`, sweeps and tests call it with a composed config, checked
before Hydra wrote anything: `headlab.config.run_check`, or `validate_config` outside Hydra): the
pieces live in `headlab.tasks` (resume, config history, the run record, CSV rows, evaluation),
`headlab.lit` (module, checkpoints, signals, loggers) and `headlab.config` (the checks).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from headlab.errors import HeadlabError
from headlab.store.run_info import configure_cache_dirs
from headlab.tasks.job import setup_job
from headlab.tasks.rank import is_rank_zero
from headlab.tasks.history import restore_first_hydra
from headlab.tasks.lock import RunLock
from headlab.tasks.record import RunRecord, absolute_data_paths, last_checkpoint_text
from headlab.config import instantiate
from headlab.tasks.build import build_callbacks, build_module
from headlab.tasks.csv_metrics import keep_csv_rows
from headlab.tasks.resume import find_resume, finished_run, refuse_fresh_over_run
from headlab.tasks.summary import evaluate_best, last_state, overfitting_line
from headlab.store import RunDir

log = logging.getLogger("headlab.train")


def train(cfg: DictConfig) -> dict[str, Any]:
    """Fit, validate and test one configuration; returns the summary written to `summary.json`.
    The run dir is locked for the whole run (`headlab.tasks.lock`: one writer; under DDP rank 0 holds it)."""
    import contextlib

    run = RunDir(cfg.paths.output_dir)  # the one RunDir of this run, passed down
    lock = RunLock(run) if is_rank_zero() else contextlib.nullcontext()
    lock.__enter__()  # held already when Hydra's LockRunDir took it before writing .hydra/ (a -m job: taken here)
    try:
        return _train(cfg, run)
    finally:
        lock.__exit__(None, None, None)


def _train(cfg: DictConfig, run: RunDir) -> dict[str, Any]:
    configure_cache_dirs(Path(cfg.paths.log_dir))
    absolute_data_paths(cfg)  # the run records where its data is, not where it was typed from
    done = finished_run(cfg, run)
    if done is not None:  # resume=auto or true on a run completed with these settings: nothing to do
        restore_first_hydra(run)  # Hydra rewrote .hydra/ for this launch
        log.info("%s: completed already with these settings (resume=%s): not trained again", run.path, str(cfg.resume).lower())
        return {**done, "run_dir": str(run.path)}  # the folder it is now (a moved run: not the summary's)
    if is_rank_zero():
        refuse_fresh_over_run(cfg, run)  # before the record: a finished run is never silently replaced
    with RunRecord(cfg, run) as record:
        setup_job(cfg)
        import lightning as L  # heavy imports (Lightning, through lit/) after the config checks

        from headlab.lit.loggers import build_loggers, closing_wandb, log_config
        from headlab.lit.checkpointing import AtomicCheckpointIO, RunInterrupted
        from headlab.lit.signals import RunSignals

        resume = find_resume(cfg, run)  # refuses a changed model or settings before anything is rewritten
        with RunSignals() as signals:  # from before this start's record: a signal anywhere after is a clean stop
            signals.deferred = True  # a signal in the setup stops the run at training start (headlab.lit.signals)
            record.start(resume)
            with closing_wandb(), keep_csv_rows(run, resume.step if resume and is_rank_zero() else None):
                L.seed_everything(cfg.seed, workers=True)
                datamodule = instantiate(cfg.data)
                datamodule.setup("fit")
                module = build_module(cfg, datamodule)
                if resume:
                    resume.check_data_shape(module.net.config)
                if is_rank_zero():
                    datamodule.tokenizer.save(run.vocab_path)
                loggers = build_loggers(cfg, record.run_id)
                record.trainer = trainer = instantiate(cfg.trainer, callbacks=build_callbacks(cfg, run, signals, record.run_id),
                                                       logger=loggers or False, plugins=[AtomicCheckpointIO()])
                log_config(loggers, cfg)
                trainer.fit(module, datamodule=datamodule, ckpt_path=resume.path if resume else None, weights_only=True)
                last = last_checkpoint_text(run)
                if signals.requested:  # the signal came after the last training step
                    raise RunInterrupted(signals.requested, int(trainer.global_step), last)
                record.summary["last"] = last_state(trainer, last)
                record.complete(evaluate_best(cfg, trainer, module, datamodule))
                if signals.requested:
                    log.warning("%s arrived during the final evaluation: the run completed first", signals.requested)
    if is_rank_zero() and record.summary.get("status") == "completed":
        if (line := overfitting_line(record.summary)) is not None:
            log.warning("%s", line)
        write_lm_view(cfg, run)
    return record.summary


def write_lm_view(cfg: DictConfig, run: RunDir) -> None:
    """A causal LM run's view.html (callbacks.lm_metrics.view), written once summary.json holds the LM
    facts its slider marks (a classifier's page is written by its callback at fit end). A page that
    cannot be written is a warning: the run itself completed."""
    node = OmegaConf.select(cfg, "callbacks.lm_metrics", default=None)
    if node is None or not node.get("view", False):
        return
    from headlab.view import write_view  # the page's readers are imported only when a page is written

    try:
        log.info("wrote %s", write_view(run))
    except HeadlabError as err:
        log.warning("view.html not written: %s", err)
