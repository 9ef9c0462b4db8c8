"""The analysis commands' schemas, stored in Hydra's ConfigStore (by `headlab.config.register_configs`)
so that each `conf/<command>.yaml` names its schema in its defaults list and the values are written
once, in the dataclass."""

from __future__ import annotations

from typing import Any


def store_command_schemas(store: Any) -> None:
    from headlab.config.aggregate import AggregateCommand
    from headlab.config.analyze_hf import AnalyzeHFConfig
    from headlab.config.doctor import DoctorCommand
    from headlab.config.importance import ImportanceCommand
    from headlab.config.prune import PruneCommand
    from headlab.config.report import ReportCommand
    from headlab.config.reproduce import reproduce_schema
    from headlab.config.view import ViewCommand

    store.store(name="importance_schema", node=ImportanceCommand)
    store.store(name="prune_schema", node=PruneCommand)
    store.store(name="analyze_hf_schema", node=AnalyzeHFConfig)
    store.store(name="aggregate_schema", node=AggregateCommand)
    store.store(name="reproduce_schema", node=reproduce_schema())
    store.store(name="doctor_schema", node=DoctorCommand)
    store.store(name="view_schema", node=ViewCommand)
    store.store(name="report_schema", node=ReportCommand)
