"""The config, as Hydra composed it, checked before Hydra creates the run folder or writes `.hydra/`.

`CheckConfig` is Hydra's `on_run_start` callback of every command (conf/hydra/default.yaml and
tool.yaml); with -m the CheckedSweeper (hydra_plugins/headlab_sweeper) checks every job the same way
before the first starts. Hydra 1.3 turns an Exception raised in a callback into a warning and runs
the job anyway (hydra/_internal/callbacks.py), so a refusal travels as `ConfigRefused`, a
BaseException like SystemExit, to `headlab.config.app.run_hydra`, which prints its one line.
"""

from __future__ import annotations

import copy
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict

from headlab.errors import HeadlabError


class ConfigRefused(BaseException):  # noqa: N818 - a refusal, not an error Hydra may catch
    def __init__(self, error: HeadlabError) -> None:
        super().__init__(str(error))
        self.error = error


def check_composed(config_name: str, cfg: DictConfig) -> None:
    """ConfigError for the first mistake in a composed config: headlab-train's by `validate_config`
    (its values, ranges and the `_target_`s it builds), another command's by its typed schema."""
    if config_name == "train":
        from headlab.config.validate import validate_config

        validate_config(cfg)
        return
    from headlab.config.validate import refuse_unknown_keys

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

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _refused_unless(lambda: _prepare_folders(config, config.hydra.sweep.dir))  # the sweeper checks each job

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _refused_unless(lambda: (_prepare_folders(config, config.hydra.run.dir),
                                 check_composed(str(config.hydra.job.config_name), config)))


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
