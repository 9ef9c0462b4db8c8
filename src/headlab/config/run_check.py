"""The config, as Hydra composed it, checked before Hydra creates the run folder or writes `.hydra/`.

`CheckConfig` is Hydra's `on_run_start` callback of every command (conf/hydra/default.yaml and
tool.yaml); with -m the CheckedSweeper (hydra_plugins/headlab_sweeper) checks every job the same way
before the first starts. Hydra 1.3 turns an Exception raised in a callback into a warning and runs
the job anyway (hydra/_internal/callbacks.py), so a refusal travels as `ConfigRefused`, a
BaseException like SystemExit, to `headlab.config.app.run_hydra`, which prints its one line.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict

from headlab.config.messages import as_typed, schema_fields, unknown_key
from headlab.errors import HeadlabError


class ConfigRefused(BaseException):  # noqa: N818 - a refusal, not an error Hydra may catch
    def __init__(self, error: HeadlabError) -> None:
        super().__init__(str(error))
        self.error = error


def check_composed(cfg: DictConfig) -> None:
    """ConfigError for the first mistake in a composed config: by the check its Hydra config names
    (`hydra.callbacks.check_config.check`: headlab-train's `validate_config`), else by its typed schema
    (a tool command's, whose `__post_init__` checks run)."""
    check = OmegaConf.select(cfg, "hydra.callbacks.check_config.check")
    if check:
        from hydra.utils import get_object

        get_object(str(check))(cfg)
        return
    task = copy.deepcopy(cfg)
    if "hydra" in task:
        with open_dict(task):
            del task["hydra"]
    refuse_unknown_keys(task)
    typed(task)


def typed(cfg: Any) -> Any:
    """The schema's object for a composed config (its `__post_init__` checks run); a missing mandatory
    value or a wrong type is a ConfigError naming the key."""
    from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

    from headlab.config.messages import first_line
    from headlab.errors import ConfigError

    try:
        return OmegaConf.to_object(cfg)
    except MissingMandatoryValue as err:
        raise ConfigError(str(err.full_key), None, f"a value ({err.full_key} has no default): {err.full_key}=...") from None
    except OmegaConfBaseException as err:
        raise ConfigError(str(getattr(err, "full_key", "") or "config"), None, first_line(err)) from None


class CheckConfig(Callback):
    """First headlab-train's folders, as the composed config names them (the run's or the sweep's, and the
    log folder that holds the caches): a file in the way or a read-only file system is one line before
    Hydra makes anything, and the caches point there before a check imports Lightning; then the config."""

    def __init__(self, check: str | None = None) -> None:
        self.check = check  # the command's own check; check_composed reads it from the config (the sweeper too)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _refused_unless(lambda: _prepare_folders(config, config.hydra.sweep.dir))  # the sweeper checks each job

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _refused_unless(lambda: (_prepare_folders(config, config.hydra.run.dir), check_composed(config)))


def _prepare_folders(config: DictConfig, folder: Any) -> None:
    if "paths" not in config:  # another command's: its own work checks what it writes
        return
    from pathlib import Path

    from headlab.store.faults import require_creatable
    from headlab.store.run_info import configure_cache_dirs

    log_dir = Path(str(config.paths.log_dir))
    for path in (log_dir, Path(str(folder))):  # the log folder named first when it is the one in the way
        require_creatable(path)
    configure_cache_dirs(log_dir)


def _refused_unless(check: Any) -> None:
    try:
        check()
    except HeadlabError as err:
        raise ConfigRefused(err) from None


def refuse_unknown_keys(node: DictConfig, path: str = "") -> None:
    """A key added with `+` to a node a command's schema types must be one of its fields."""
    if "_target_" in node:
        return
    schema = OmegaConf.get_type(node)
    if dataclasses.is_dataclass(schema):
        fields = schema_fields(schema)
        for key in node.keys():
            if key not in fields:
                raise unknown_key(f"{path}{key}", as_typed(node, key), list(fields))
    for key in node.keys():
        child = node._get_node(key)  # noqa: SLF001 - the node, its value unresolved
        if isinstance(child, DictConfig) and key != "hydra":
            refuse_unknown_keys(child, f"{path}{key}.")
