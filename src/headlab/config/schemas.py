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

    from headlab.config.aggregate import AggregateCommand
    from headlab.config.doctor import DoctorCommand
    from headlab.config.importance import ImportanceCommand
    from headlab.config.prune import PruneCommand
    from headlab.config.reproduce import reproduce_schema

    store = ConfigStore.instance()
    store.store(name="importance_schema", node=ImportanceCommand)
    store.store(name="prune_schema", node=PruneCommand)
    store.store(name="aggregate_schema", node=AggregateCommand)
    store.store(name="reproduce_schema", node=reproduce_schema())
    store.store(name="doctor_schema", node=DoctorCommand)
    _REGISTERED = True
