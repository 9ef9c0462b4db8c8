"""Which process of a distributed run this is, known before any Trainer exists.

Under DDP every rank runs `train()` on the same run directory (Lightning re-launches the command
with `hydra.run.dir` pinned), so whatever writes the run's record (summary, config segments,
vocabulary, CSV rows) asks `is_rank_zero()` first. The rule is Lightning's own
(`lightning.fabric.utilities.rank_zero`): the first of RANK, LOCAL_RANK, SLURM_PROCID,
JSM_NAMESPACE_RANK that is set, else 0; read here without importing Lightning, so config checks
stay fast.
"""

from __future__ import annotations

import os

RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


def process_rank() -> int:
    """The global rank of this process (0 outside a distributed run)."""
    for key in RANK_VARIABLES:
        value = os.environ.get(key)
        if value is not None:
            return int(value)
    return 0


def is_rank_zero() -> bool:
    return process_rank() == 0
