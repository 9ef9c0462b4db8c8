"""`headlab-train [overrides]`: train one experiment and write the run-output contract.

Hydra composes `conf/train.yaml` once; Hydra's callbacks check it (`headlab.config.run_check`; with
-m the CheckedSweeper, every job) and lock the run folder (`headlab.tasks.lock`) before anything is
written, and `headlab.tasks.train.train` runs it. This module only maps what can go wrong to one line
and an exit code (`headlab.config.app.run_hydra`, docs/troubleshooting.md). `python -m headlab.cli.train`
is the same.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path

import hydra
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from headlab.config.app import run_hydra
from headlab.errors import HeadlabError
from headlab.store.run_info import configure_cache_dirs
from headlab.tasks.rank import is_rank_zero

log = logging.getLogger("headlab.train")

EXIT_CONFIG, EXIT_DIVERGED = 2, 3
# The name in its messages: headlab-distill runs this command under its own.
PROG = {"name": "headlab-train"}
# The folder of this process's -m sweep, set by SweepFolder when the sweep starts: printed last.
SWEEP_DIR: dict[str, str] = {}


class SweepFolder(Callback):
    """Hydra's callback (conf/hydra/default.yaml) that notes the sweep's folder as the sweep starts, in the
    process that launches the jobs: `main` prints it last, after every job's run folder, failed jobs or not.
    Reading `hydra.sweep.dir` here fixes its `${now:}` for the sweeper too (Hydra caches the resolver per config)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: object) -> None:
        SWEEP_DIR["path"] = str(Path(str(config.hydra.sweep.dir)).absolute())


@hydra.main(version_base="1.3", config_path="pkg://headlab.conf", config_name="train")
def _hydra_main(cfg: DictConfig) -> float | None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    configure_cache_dirs(Path(cfg.paths.log_dir))  # before anything imports matplotlib or wandb
    # Imported here, after the cache folders are set: training imports Lightning, which imports matplotlib,
    # and matplotlib fixes its cache folder (else under $HOME) when first imported.
    from headlab.tasks.train import train

    multirun = HydraConfig.get().mode == RunMode.MULTIRUN
    try:
        summary = train(cfg)
    except HeadlabError as err:
        _fail(err, multirun, "error", EXIT_CONFIG)
    except Exception as err:
        from headlab.lit import NonFiniteLossError  # Lightning-heavy: imported only once train() got that far
        from headlab.lit.signals import RunInterrupted

        if isinstance(err, RunInterrupted):  # SIGTERM / Ctrl-C: stop this job and any sweep around it
            print(f"{PROG['name']}: {err}; continue with: {PROG['name']} resume=true "
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
    print(f"{PROG['name']}: {kind}: {err}", file=sys.stderr)
    sys.exit(code)


def main(prog: str = "headlab-train") -> None:
    """Hydra composes the command line once; a mistake is one line and exit 2, nothing written."""
    PROG["name"] = prog  # its folders (a file in the way, a read-only disk) are checked by Hydra's CheckConfig
    from headlab.cli.train import SWEEP_DIR as noted  # Hydra's SweepFolder is this module's, also under `python -m`

    noted.clear()  # a sweep an earlier call in this process started is not this call's
    signals = contextlib.nullcontext()
    if {"-m", "--multirun"} & set(sys.argv[1:]):
        from headlab.sweep.signals import SweepSignals

        signals = SweepSignals(PROG["name"])  # SIGTERM / SIGINT reach every job, none is left orphaned
    with signals:
        code = run_hydra(prog, "train", _hydra_main, sys.argv[1:])
    path = noted.pop("path", None)
    if path and Path(path).is_dir():  # the sweep's folder, last: aggregate it
        print(path)
    if code:
        sys.exit(code)


if __name__ == "__main__":
    main()
