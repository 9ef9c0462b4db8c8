"""`headlab-prune`'s schema: which run, and how heads are removed round by round."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from omegaconf import MISSING

from headlab.config.values import check_bools, check_choice, check_device, check_int, is_number
from headlab.errors import ConfigError

# The pruning loop's rankings (headlab.interventions.pruning): seed_avg is ablation averaged over a sweep
# config's seeds.
PRUNE_RANKINGS = ("ablation", "gradient", "random", "seed_avg")
# Which examples rank the heads and decide the stop: the whole validation split, or its half A (even positions of
# the split as the datamodule orders it), with half B (odd positions) and test read only for the report
# (headlab.tasks.pruning.val_halves).
PRUNE_SELECTIONS = ("val", "val_half")


@dataclass
class PruneSettings:
    """conf/prune.yaml's `prune:` node (docs/importance.md#headlab-prune)."""

    ranking: str = "ablation"  # ablation, gradient, random (the control), or seed_avg (a sweep job: ablation averaged over its config's seeds)
    fraction_per_step: float = 0.1  # remove this share of the REMAINING heads per round (at least one), in (0, 1)
    max_drop: float = 0.01  # stop before val accuracy falls more than this below the unpruned model's (0.01 = 1 point)
    selection: str = "val"  # val: the whole val split ranks and stops; val_half: its half A does, half B and test are held out
    finetune_steps: int = 0  # AdamW steps on the train split after each round (0: no fine-tune)
    finetune_lr: float = 1e-4  # a low lr: recover, not retrain
    recompute: bool = True  # re-rank the remaining heads after every round (always, when fine-tuning)
    normalize_layers: bool = True  # gradient ranking: per-layer L2-normalised scores, as Michel et al. prune
    random_seed: int = 0  # the random ranking's scores, and the fine-tune batch order and dropout
    checkpoint: str = "last"  # last or best: the checkpoint to prune
    batch_size: int = 128  # examples per forward
    max_rows: int = 4096  # batched ablation: sequences per forward
    figures: bool = True  # figures/prune_curve.png
    device: str = "cpu"
    threads: Optional[int] = None
    speedup: bool = True  # time the pruned network against the unpruned one (batch 1 and 64, seq data.max_len) into prune.json
    speedup_rounds: int = 30  # timed rounds per batch size, interleaved; the speed-up is the ratio of the medians

    def __post_init__(self) -> None:
        check_choice("prune.ranking", self.ranking, PRUNE_RANKINGS)
        check_choice("prune.selection", self.selection, PRUNE_SELECTIONS)
        if not is_number(self.fraction_per_step) or not 0.0 < self.fraction_per_step < 1.0:
            raise ConfigError("prune.fraction_per_step", self.fraction_per_step, "a number in (0, 1), e.g. 0.1")
        if not is_number(self.max_drop) or self.max_drop < 0:
            raise ConfigError("prune.max_drop", self.max_drop, "an accuracy drop >= 0, e.g. 0.01 for one point")
        if not is_number(self.finetune_lr) or self.finetune_lr <= 0:
            raise ConfigError("prune.finetune_lr", self.finetune_lr, "a learning rate > 0")
        check_int("prune.finetune_steps", self.finetune_steps, 0)
        check_int("prune.random_seed", self.random_seed, None)
        for key in ("batch_size", "max_rows", "speedup_rounds"):
            check_int(f"prune.{key}", getattr(self, key), 1)
        if self.threads is not None:
            check_int("prune.threads", self.threads, 1)
        check_bools("prune", self, ("recompute", "normalize_layers", "figures", "speedup"))
        check_choice("prune.checkpoint", self.checkpoint, ("last", "best"))
        check_device("prune.device", self.device)

    @property
    def label(self) -> str:
        """`<ranking>-ft<steps>` (selection=val) or `<ranking>-valhalf-ft<steps>` (val_half): one pruned checkpoint
        and one curve per ranking, selection and fine-tune length."""
        return f"{self.ranking}{'-valhalf' if self.selection == 'val_half' else ''}-ft{self.finetune_steps}"


@dataclass
class PruneCommand:
    """`headlab-prune run_dir=RUN [prune.KEY=VALUE ...]`."""

    run_dir: str = MISSING  # a finished headlab-train run (holds its config and checkpoints/)
    prune: PruneSettings = field(default_factory=PruneSettings)


SCHEMA = PruneCommand  # stored as prune_schema (headlab.config.schemas)
