"""`CheckConfig`: headlab-train's config, as Hydra composed it, checked before Hydra creates the run
folder or writes `.hydra/` (Hydra's `on_run_start`), so a refused command writes nothing.

Hydra 1.3 turns an Exception raised in a callback into a warning and runs the job anyway
(hydra/_internal/callbacks.py), so the refusal travels as `ConfigRefused`, a BaseException like
SystemExit, which headlab-train's main turns into its one line. A -m sweep is checked job by job by
the CheckedSweeper instead (hydra_plugins/headlab_sweeper).
"""

from __future__ import annotations

from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from headlab.errors import ConfigError


class ConfigRefused(BaseException):  # noqa: N818 - a refusal, not an error Hydra may catch
    def __init__(self, error: ConfigError) -> None:
        super().__init__(str(error))
        self.error = error


class CheckConfig(Callback):
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        from hydra import compose

        from headlab.config.overrides import refuse_unknown_added_keys
        from headlab.config.validate import validate_config

        try:
            refuse_unknown_added_keys(compose, str(config.hydra.job.config_name), list(config.hydra.overrides.task))
            validate_config(config)
        except ConfigError as err:
            raise ConfigRefused(err) from None
