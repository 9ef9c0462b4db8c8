"""Facts about a run that go into `summary.json`: digest, overrides, swept values."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Iterable

from omegaconf import DictConfig, OmegaConf

# The values sweeps vary; summary.json carries them flat so aggregation needs no config parsing.
SWEPT_KEYS = ("seed", "model.n_heads", "model.d_model", "model.d_head", "model.n_layers", "model.init_scale",
              "model.pos_encoding", "optim.lr", "optim.schedule", "optim.warmup_steps", "optim.warmup_ratio",
              "data.source", "data.seed")


def swept_values(cfg: DictConfig) -> dict[str, Any]:
    return {key: OmegaConf.select(cfg, key) for key in SWEPT_KEYS}


def config_digest(cfg: DictConfig) -> str:
    """sha1 of the resolved config without output paths: equal digests = same experiment."""
    container = OmegaConf.to_container(cfg, resolve=True)
    container.pop("paths", None)
    for callback in (container.get("callbacks") or {}).values():
        if isinstance(callback, dict):
            callback.pop("output_dir", None)
            callback.pop("dirpath", None)
    for logger in (container.get("logger") or {}).values():
        if isinstance(logger, dict):
            logger.pop("save_dir", None)
    text = OmegaConf.to_yaml(OmegaConf.create(container), sort_keys=True)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def job_overrides(exclude: Iterable[str] = ()) -> str:
    """The job's command-line overrides as one string ('' outside Hydra)."""
    return ",".join(job_override_list(exclude))


def job_override_list(exclude: Iterable[str] = ()) -> list[str]:
    """The job's command-line overrides whose key is not in `exclude` ([] outside Hydra)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    excluded = tuple(exclude)
    return [o for o in HydraConfig.get().overrides.task if o.split("=", 1)[0].lstrip("+~") not in excluded]


def default_log_dir() -> Path:
    """The log folder when no command line names one: conf/paths/default.yaml's rule
    (`${oc.env:HEADLAB_LOG_DIR,logs}`), for the commands that are not Hydra apps or need it
    before Hydra composes anything."""
    return Path(os.environ.get("HEADLAB_LOG_DIR", "logs"))


def configure_cache_dirs(log_dir: Path) -> None:
    """Keep matplotlib and W&B caches under the log folder, never in the home directory; a log folder
    that cannot hold them (a file, a read-only or pseudo file system) is a `StorageError` naming it."""
    from headlab.store.faults import make_folder, require_creatable

    cache = log_dir.resolve() / ".cache"
    missing = [(var, sub) for var, sub in (("MPLCONFIGDIR", "matplotlib"), ("WANDB_CACHE_DIR", "wandb"),
                                           ("WANDB_CONFIG_DIR", "wandb-config"), ("WANDB_DATA_DIR", "wandb-data"))
               if var not in os.environ]
    if missing:
        require_creatable(log_dir)
    for var, sub in missing:
        os.environ[var] = str(make_folder(cache / sub))


def code_commit() -> str:
    """The commit of the headlab checkout this code runs from, `-dirty` when tracked files differ
    from it ("unknown" outside a git checkout): every run records it, so a verdict can name the
    code its evidence came from."""
    import subprocess

    here = str(Path(__file__).resolve().parent)

    def git(*args: str) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run(["git", "-C", here, *args], capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return None

    head = git("rev-parse", "--short", "HEAD")
    if head is None or head.returncode != 0 or not head.stdout.strip():
        return "unknown"
    clean = git("diff", "--quiet", "HEAD")
    return head.stdout.strip() + ("" if clean is not None and clean.returncode == 0 else "-dirty")
