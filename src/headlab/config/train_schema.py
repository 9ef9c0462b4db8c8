"""headlab-train's top level: train.yaml's own keys (TrainKeys) and the config groups conf/ ships.

The groups' nodes have no schema of their own: each is a `_target_` node (or holds them), and its keys
and values are checked after composition against the target's signature (`headlab.config.signature`),
so a parameter renamed in code is a config key renamed with it. The top level is no object, so its
keys are written here; `headlab.config.validate` checks their values.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import List, Literal, Optional, Union


@dataclass
class TrainKeys:
    """train.yaml's own keys and their types (`headlab.config.validate` checks the values)."""

    seed: int = 42
    resume: Union[bool, Literal["auto"]] = False
    test: bool = True
    figures: bool = True  # the per-run figures at fit end (each measuring callback's `figures` reads it)
    sweep_name: Optional[str] = None
    threads: Union[int, Literal["auto"], None] = None
    tags: List[str] = field(default_factory=list)
    resume_allow: List[str] = field(default_factory=list)
    overwrite: bool = False  # a fresh start in a run dir that holds a run replaces it (else refused)


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


def top_level_keys(present: Iterable[str]) -> list[str]:
    """The keys headlab-train's top level may hold, those `present` first in their order: train.yaml's own
    (TrainKeys), the module, each config group's node (also one not selected: `debugg=` names `debug`), and
    the teacher run headlab-distill's group (conf/distill/) adds."""
    allowed = ["module", *(f.name for f in dataclasses.fields(TrainKeys)), "teacher", *config_groups()]
    return list(dict.fromkeys([*(k for k in present if k in allowed), *allowed]))
