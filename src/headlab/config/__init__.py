"""Structured-config schemas for headlab's commands, registered in Hydra's ConfigStore.

Every entry point calls `register_configs()` before composing (conf/__init__.py does too, so a
composition from the headlab.conf package in a test or notebook finds the schemas as well).
"""

from __future__ import annotations

_registered = False


def register_configs() -> None:
    """Store every schema under schema/ in Hydra's ConfigStore; calling it again does nothing."""
    global _registered
    if _registered:
        return
    from hydra.core.config_store import ConfigStore

    from headlab.config.schemas import store_command_schemas
    from headlab.config.train_schema import store_train_schemas

    store_train_schemas(ConfigStore.instance())
    store_command_schemas(ConfigStore.instance())
    _registered = True
