"""The commands' schemas in Hydra's ConfigStore, so that each `conf/<command>.yaml` names its
schema in its defaults list and the values are written once, in the dataclass."""

from __future__ import annotations

_REGISTERED = False


def register_tool_schemas() -> None:
    """Store every command's schema (idempotent: entry points and tests call it before composing)."""
    global _REGISTERED
    if _REGISTERED:
        return
    from hydra.core.config_store import ConfigStore

    from headlab.config.analyze_hf import AnalyzeHFConfig
    from headlab.config.importance import ImportanceCommand
    from headlab.config.prune import PruneCommand

    store = ConfigStore.instance()
    store.store(name="importance_schema", node=ImportanceCommand)
    store.store(name="prune_schema", node=PruneCommand)
    store.store(name="analyze_hf_schema", node=AnalyzeHFConfig)
    _REGISTERED = True
