"""`headlab-llc`'s schema: which run, which of its checkpoints, and the SGLD sampler's settings.

The sampler keys mirror `headlab.interventions.llc.SGLDSettings` (its docstring and docs/language_models.md
say how the defaults were calibrated); a test keeps the two in step. Not imported from there: that
module loads torch, scipy and pandas, and a config is checked before anything heavy loads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from omegaconf import MISSING

from headlab.config.values import check_bools, check_choice, check_device, check_int, is_number
from headlab.errors import ConfigError


SAMPLER_KEYS = ("lr", "localization", "nbeta", "chains", "draws", "burnin", "batch_size", "seed", "flat_tolerance",
                "trend_alpha")  # the keys that are SGLDSettings' fields


@dataclass
class LLCSettings:
    """conf/llc.yaml's `llc:` node (docs/language_models.md, "Per-head refined LLC")."""

    # which checkpoints: at most `checkpoints` of the run's saved ones, spread evenly in log(step) (dense
    # early, where heads form), the newest always among them; `steps` names them instead (each must be saved)
    checkpoints: int = 6
    steps: Optional[List[int]] = None
    whole_model: bool = True  # the whole model's LLC (rows layer = head = -1) beside every head's rLLC
    split: str = "train"  # the sequences the loss is sampled on: train (the LLC's L_n), val or test
    max_sequences: int = 512  # at most this many of the split (a seeded draw, `seed`)
    # SGLD (devinterp's names: lr, localization, n_beta, num_chains, num_draws, num_burnin_steps)
    lr: float = 1e-3
    localization: float = 100.0
    nbeta: float = 30.0
    chains: int = 2
    draws: int = 100
    burnin: int = 50
    batch_size: int = 32
    seed: int = 0  # chain c's noise seed is seed + c; also the draw of the sequences
    flat_tolerance: float = 0.2  # a chain's largest relative drift over its last half of draws ...
    trend_alpha: float = 0.05  # ... unless its slope is not told apart from 0 at this level
    figures: bool = True  # figures/llc.png
    device: str = "cpu"
    threads: Optional[int] = 1  # torch threads (null: torch's default); 1 is fastest for these small models

    def __post_init__(self) -> None:
        check_int("llc.checkpoints", self.checkpoints, 1)
        if self.steps is not None:
            steps = list(self.steps)
            if not steps or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in steps):
                raise ConfigError("llc.steps", steps, "null or a non-empty list of saved steps (integers >= 0)")
        check_bools("llc", self, ("whole_model", "figures"))
        check_choice("llc.split", self.split, ("train", "val", "test"))
        for key, minimum in (("max_sequences", 1), ("chains", 1), ("draws", 4), ("burnin", 0), ("batch_size", 1), ("seed", 0)):
            check_int(f"llc.{key}", getattr(self, key), minimum)
        for key in ("lr", "nbeta", "flat_tolerance"):
            if not is_number(getattr(self, key)) or not getattr(self, key) > 0:
                raise ConfigError(f"llc.{key}", getattr(self, key), "a number > 0")
        if not is_number(self.localization) or self.localization < 0:
            raise ConfigError("llc.localization", self.localization, "a number >= 0")
        if not is_number(self.trend_alpha) or not 0 < self.trend_alpha < 1:
            raise ConfigError("llc.trend_alpha", self.trend_alpha, "a number in (0, 1)")
        if self.batch_size > self.max_sequences:
            raise ConfigError("llc.batch_size", self.batch_size, f"at most llc.max_sequences={self.max_sequences}")
        check_device("llc.device", self.device)
        if self.threads is not None:
            check_int("llc.threads", self.threads, 1)


@dataclass
class LLCCommand:
    """`headlab-llc run_dir=RUN [llc.KEY=VALUE ...]`."""

    run_dir: str = MISSING  # a finished headlab-train run (its config and checkpoints/)
    llc: LLCSettings = field(default_factory=LLCSettings)


SCHEMA = LLCCommand  # stored as llc_schema (headlab.config.schemas)
