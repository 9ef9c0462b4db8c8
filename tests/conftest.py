"""Suite-wide setup: caches and run folders go to a temp dir, never $HOME or the repo."""

from __future__ import annotations

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


@pytest.fixture(autouse=True)
def _forget_hydra_config():
    """`compose_train_config` (tests/cli/conftest.py, used across the suite) sets Hydra's global run
    config; unset it after every test, so later tests (e.g. config checks outside a Hydra run) see no
    leftover `hydra:` values whatever order the tests run in."""
    yield
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().cfg = None
