"""The Hydra-app machinery every command shares: the CheckedSweeper and `--help`'s group list, registered
before any composition, and `instantiate`.

Every entry point calls `register_configs()` before composing (conf/__init__.py does too, so a
composition from the headlab.conf package in a test or notebook finds them as well). Each command's
schema and checks live beside the work it configures (headlab-train's: headlab.tasks.train_config);
`headlab.config.app.run_app` stores a tool command's schema.
"""

from __future__ import annotations

import functools
from importlib.util import find_spec
from pathlib import Path
from typing import Any

_registered = False


def register_configs() -> None:
    """Register the `headlab_groups` resolver (headlab-train --help), the `open` node (a data source takes
    any parameter of its datamodule, checked by its signature) and the CheckedSweeper as
    hydra/sweeper=checked (for every config module: headlab.conf and headlab.conf.hf); calling it
    again does nothing."""
    global _registered
    if _registered:
        return
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins
    from omegaconf import OmegaConf

    OmegaConf.register_new_resolver("headlab_groups", help_groups, replace=True)  # headlab-train --help
    open_node = OmegaConf.create({})  # `- /open@_here_` in a data file: data.train_fraction=0.2 needs no `+`
    OmegaConf.set_struct(open_node, False)
    ConfigStore.instance().store(name="open", node=open_node, provider="headlab")
    plugins = Plugins.instance()  # Hydra's scan first: it re-executes BasicSweeper's module, the base class below
    from hydra_plugins.headlab_sweeper import CheckedSweeper

    plugins.register(CheckedSweeper)  # whether the scan found it or not
    from dataclasses import replace

    from hydra._internal.core_plugins.basic_sweeper import BasicSweeperConf

    checked = replace(BasicSweeperConf(), _target_="hydra_plugins.headlab_sweeper.CheckedSweeper")
    ConfigStore.instance().store(group="hydra/sweeper", name="checked", node=checked, provider="headlab")
    _registered = True


def instantiate(node: Any, **kwargs: Any) -> Any:
    """`hydra.utils.instantiate`, but a headlab error inside comes out as itself, not wrapped in
    Hydra's InstantiationException (whose text is several lines and a traceback's worth of context)."""
    import hydra
    from hydra.errors import InstantiationException

    from headlab.errors import HeadlabError

    try:
        return hydra.utils.instantiate(node, **kwargs)
    except InstantiationException as err:
        cause = err.__cause__
        while cause is not None and not isinstance(cause, HeadlabError):
            cause = cause.__cause__
        if cause is None:
            raise
        raise cause from None


def _conf_dir() -> Path:
    """conf/ (the package headlab.conf), found without importing it: its import registers the configs."""
    return Path(find_spec("headlab.conf").submodule_search_locations[0])


# conf/'s folders that are no headlab-train group: Hydra's, and those of headlab-analyze-hf and headlab-reproduce.
_NOT_TRAIN_GROUPS = ("hydra", "hf", "reproduce", "suite", "__pycache__")


@functools.lru_cache(maxsize=None)
def config_groups() -> tuple[str, ...]:
    """headlab-train's config groups as a user selects them (`data=...`, `+distill=...`)."""
    return tuple(sorted(p.name for p in _conf_dir().iterdir() if p.is_dir() and p.name not in _NOT_TRAIN_GROUPS))


def help_groups() -> str:
    """`headlab-train --help`'s list: each group with the options conf/ ships (`group: a, b`), one a line."""
    return "\n".join(f"{g}: " + ", ".join(sorted(f.stem for f in (_conf_dir() / g).glob("*.yaml"))) for g in config_groups())
