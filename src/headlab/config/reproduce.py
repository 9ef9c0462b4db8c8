"""`headlab-reproduce`'s schema: which claims, at which scale, from which evidence, and whether to run
the sweeps first (docs/reproduce.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from headlab.config.values import check_choice, check_int
from headlab.errors import ConfigError

SCALES = ("quick", "cpu", "full")


@dataclass
class ReproduceCommand:
    """`headlab-reproduce [run=true] [jobs=true] [scale=quick|cpu|full] [KEY=VALUE ...]`."""

    run: bool = False  # run the sweeps and commands first (resumable), then report
    jobs: bool = False  # print the commands run=true would run at this scale and exit (= run + dry_run)
    dry_run: bool = False  # with run=true: print the commands, run nothing
    scale: str = "quick"  # quick: exploratory CPU run; cpu: the confirmatory CPU run (make reproduce-cpu); full: the article's scale
    specs: Optional[str] = None  # folder of claim specs (null: the shipped conf/reproduce)
    sweeps_root: Optional[str] = None  # where sweeps live (null: $HEADLAB_LOG_DIR/sweeps, else logs/sweeps)
    evidence: Dict[str, str] = field(default_factory=dict)  # SWEEP_NAME: DIR, this sweep folder for that sweep
    out: Optional[str] = None  # report folder (null: reports/<today>)
    only: List[str] = field(default_factory=list)  # claim ids (empty: all)
    launcher: Optional[str] = None  # Hydra launcher of the sweeps (null: joblib for quick and cpu, slurm for full; basic: one job at a time)
    lanes: int = 2  # sweeps run side by side, each job with cores / lanes threads
    override: List[str] = field(default_factory=list)  # KEY=VALUE appended to every sweep, e.g. trainer.accelerator=gpu

    def __post_init__(self) -> None:
        for key in ("run", "jobs", "dry_run"):
            if not isinstance(getattr(self, key), bool):
                raise ConfigError(key, getattr(self, key), "true or false")
        check_choice("scale", self.scale, SCALES)
        check_int("lanes", self.lanes, 1)
        bad = [o for o in self.override if "=" not in o]
        if bad:
            raise ConfigError("override", bad[0], "KEY=VALUE")


def reproduce_schema():
    """The schema as ConfigStore keeps it: `evidence` open to new sweep names, so that
    `evidence={NAME:DIR}` and `evidence.NAME=DIR` work (Hydra locks every other key: a typo is refused)."""
    from omegaconf import OmegaConf

    node = OmegaConf.structured(ReproduceCommand)
    OmegaConf.set_struct(node.evidence, False)
    return node


SCHEMA = reproduce_schema()  # stored as reproduce_schema (headlab.config.schemas)
