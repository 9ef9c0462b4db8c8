"""Suite-wide setup: caches and run folders go to a temp dir, never $HOME or the repo."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import pytest

_ROOT = Path(tempfile.gettempdir()) / f"headlab-tests-{os.getuid()}"
# Read when matplotlib / wandb are first imported: set before any test module imports them.
for _var, _sub in (("MPLCONFIGDIR", "mplconfig"), ("WANDB_DIR", "wandb"), ("WANDB_CACHE_DIR", "wandb-cache"),
                   ("WANDB_CONFIG_DIR", "wandb-config"), ("WANDB_DATA_DIR", "wandb-data")):
    os.environ.setdefault(_var, str(_ROOT / _sub))
    Path(os.environ[_var]).mkdir(parents=True, exist_ok=True)
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")

from tests._runs import RESUMABLE, TINY, compose_train_config, run_cli  # noqa: E402 - after the cache dirs are set


@pytest.fixture(autouse=True)
def _forget_hydra_config():
    """`compose_train_config` (tests/_runs.py, used across the suite) sets Hydra's global run
    config; unset it after every test, so later tests (e.g. config checks outside a Hydra run) see no
    leftover `hydra:` values whatever order the tests run in."""
    yield
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().cfg = None


@pytest.fixture(autouse=True)
def _drop_log_handlers_of_the_test():
    """An in-process Hydra app configures logging (hydra/job_logging): a console handler on the
    stream of the moment, which under `capsys` is closed when the test ends, and a file handler in
    its tmp run dir. Left in place they turn a later test's log lines into 'Logging error'
    tracebacks on its stderr, so a test sees the handlers it set up and no later test does."""
    before = {logger: list(logger.handlers) for logger in _loggers()}
    yield
    for logger in _loggers():
        for handler in list(logger.handlers):
            if handler in before.get(logger, ()) or type(handler).__module__.startswith("_pytest"):
                continue
            logger.removeHandler(handler)
            if isinstance(handler, logging.FileHandler):
                handler.close()


def _loggers() -> list[logging.Logger]:
    """The root logger and every named one (not the placeholders of names never asked for)."""
    named = logging.root.manager.loggerDict.values()
    return [logging.root, *(logger for logger in named if isinstance(logger, logging.Logger))]


# ---- fixtures over tests/_runs.py: tiny trainings any test directory may use ------------------------------
@pytest.fixture
def tiny_config():
    """`tiny_config(run_dir, *extra)`: the config `headlab-train` would see for TINY + extra."""
    def make(run_dir: Path, *extra: str):
        return compose_train_config(run_dir, TINY + list(extra))

    return make


@pytest.fixture(scope="session")
def compose_tiny():
    """`compose_tiny(run_dir, *extra)` for fixtures wider than one test (module-scoped runs)."""

    def make(run_dir: Path, *extra: str):
        return compose_train_config(run_dir, TINY + list(extra))

    return make


@pytest.fixture
def one_thread():
    """Tiny models on a shared machine: extra torch threads only spin."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def run_copy(trained, tmp_path):
    """A copy of the module's `trained` run directory, for a command that writes into it."""
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    return copy


# One uninterrupted run of RESUMABLE per test module: what every killed-and-resumed run must equal.
@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("reference")
    result = run_cli(tmp, *RESUMABLE, f"hydra.run.dir={tmp / 'run'}")
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp / "run"
