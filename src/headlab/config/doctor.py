"""`headlab-doctor`'s schema: a finished run (or sweep) to check, or a headlab-train command line to
check before anything is trained."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from headlab.errors import ConfigError

WHAT = "either a run or sweep directory (target=PATH) or headlab-train overrides (plan=['key=value',...])"


@dataclass
class DoctorCommand:
    """`headlab-doctor target=RUN_DIR|SWEEP_DIR` or `headlab-doctor plan=[key=value,...]`."""

    target: Optional[str] = None  # a run directory, or a multirun folder: every job is diagnosed
    plan: List[str] = field(default_factory=list)  # headlab-train overrides: the config checks, nothing trained

    def __post_init__(self) -> None:
        if (self.target is None) == (not self.plan):  # neither, or both
            raise ConfigError("target", self.target, WHAT)
        bad = [o for o in self.plan if "=" not in o]
        if bad:
            raise ConfigError("plan", bad[0], "key=value overrides of headlab-train")


SCHEMA = DoctorCommand  # stored as doctor_schema (headlab.config.schemas)
