"""The analysis commands' schemas, stored in Hydra's ConfigStore (by `headlab.config.register_configs`)
so that each `conf/<command>.yaml` names its schema in its defaults list and the values are written
once, in the dataclass."""

from __future__ import annotations

from typing import Any


def store_command_schemas(store: Any) -> None:
    """Every module of headlab.config that defines `SCHEMA` (a command's settings) stored as
    `<module>_schema`, the name its conf file puts first in its defaults list: a new command's schema
    needs no line here."""
    import importlib
    import pkgutil
    from pathlib import Path

    package = __name__.rpartition(".")[0]
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        schema = getattr(importlib.import_module(f"{package}.{info.name}"), "SCHEMA", None)
        if schema is not None:
            store.store(name=f"{info.name}_schema", node=schema)
