"""`headlab-importance`'s schema: which run, which checkpoints, and how heads are scored."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from omegaconf import MISSING

from headlab.config.values import check_bools, check_choice, check_device, check_int
from headlab.errors import ConfigError
from headlab.store.run_dir import CHECKPOINT_CHOICES


@dataclass
class ImportanceSettings:
    """conf/importance.yaml's `importance:` node (docs/importance.md)."""

    split: str = "val"  # val or test: the examples every head is measured on
    batch_size: int = 128  # examples per forward
    max_rows: int = 4096  # batched ablation: at most this many sequences per forward (batch x heads of a layer)
    normalize_layers: bool = False  # gradient ranking on per-layer L2-normalised scores (Michel et al. 2019, 4.2)
    random_seed: int = 0  # the random-ranking control
    curves: bool = True  # keep-top-k (per ranking) and leave-one-layer-in curves
    figures: bool = True  # figures/importance.png: importance heat maps beside the role map
    device: str = "cpu"  # cpu, cuda, cuda:1, mps
    threads: Optional[int] = None  # torch threads (null: torch's default)
    # near-duplicate heads (from head_pairs.parquet): two heads are duplicates when their attention JS
    # <= redundancy_mass * ln 2, the JS of maps that agree except for that share of mass
    redundancy_mass: float = 0.1  # headlab.analysis.redundancy.DEFAULT_MASS (not imported: it loads torch)

    def __post_init__(self) -> None:
        if isinstance(self.redundancy_mass, bool) or not isinstance(self.redundancy_mass, (int, float)) \
                or not 0.0 < self.redundancy_mass <= 1.0:
            raise ConfigError("importance.redundancy_mass", self.redundancy_mass, "a share of attention mass in (0, 1]")
        check_choice("importance.split", self.split, ("val", "test"))
        for key in ("batch_size", "max_rows"):
            check_int(f"importance.{key}", getattr(self, key), 1)
        check_int("importance.random_seed", self.random_seed)
        if self.threads is not None:
            check_int("importance.threads", self.threads, 1)
        check_bools("importance", self, ("normalize_layers", "curves", "figures"))
        check_device("importance.device", self.device)


@dataclass
class ImportanceCommand:
    """`headlab-importance run_dir=RUN [checkpoint=last|best|all] [importance.KEY=VALUE ...]`."""

    # a finished headlab-train run (holds its config and checkpoints/), or a sweep folder (holds
    # multirun.yaml): every usable job, then headlab-aggregate
    run_dir: str = MISSING
    checkpoint: str = "last"  # last, best, or all (every checkpoint, one per step)
    importance: ImportanceSettings = field(default_factory=ImportanceSettings)

    def __post_init__(self) -> None:
        check_choice("checkpoint", self.checkpoint, CHECKPOINT_CHOICES)


SCHEMA = ImportanceCommand  # stored as importance_schema (headlab.config.schemas)
