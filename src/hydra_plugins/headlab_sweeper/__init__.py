"""`CheckedSweeper`: Hydra's BasicSweeper that checks every job's config before the first job starts.

BasicSweeper writes `multirun.yaml` and launches batch by batch, so a bad value in the last job of a
sweep (`optim.lr=1e-3,abc`, `model.n_heads=2,3`) would stop the sweep half-way, after the first jobs
ran. Here each job is composed as the launcher will compose it (Hydra's own expansion and
`load_sweep_config`) and checked as a single run is (`headlab.config.run_check.check_composed`) before
`BasicSweeper.sweep` writes anything. Hydra instantiates a sweeper only from the `hydra_plugins`
namespace package, hence its home here; `headlab.config.register_configs` stores it as
hydra/sweeper=checked and registers it with Hydra's plugins (an editable install's import mapping
hides it from Hydra's scan of the namespace).
"""

from __future__ import annotations

from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser


class CheckedSweeper(BasicSweeper):
    def sweep(self, arguments: list[str]) -> Any:
        from headlab.config.app import compose_checked
        from headlab.config.run_check import check_composed

        assert self.hydra_context is not None and self.config is not None
        loader = self.hydra_context.config_loader
        parser = OverridesParser.create(config_loader=loader)
        jobs = self.split_arguments(parser.parse_overrides([*self._parse_config(), *arguments]), None)[0]

        def compose(_name: str, overrides: list[str], return_hydra_config: bool = False) -> Any:
            return loader.load_sweep_config(self.config, list(overrides))

        name = str(self.config.hydra.job.config_name)
        for job in jobs:
            check_composed(compose_checked(compose, name, list(job)))
        return super().sweep(arguments)
