"""Length-bucketed batches: similar lengths share a batch, so dynamic padding pads little.

Char-level reviews range from a few characters to max_len, so random batches are mostly padding.
Each epoch: shuffle all indices, cut them into pools of `batch_size * pool_batches`, sort each
pool by length, cut the pool into batches, then shuffle the batches. Every index appears once
per epoch, batches are still random across the data, and the order depends only on
(seed, epoch).

Distributed (DDP): every rank computes the same global batch order and takes every
`num_replicas`-th batch from its `rank`. The order is padded by wrapping to a multiple of
`num_replicas` (as `DistributedSampler` pads), so every rank runs the same number of steps
(a rank with fewer would hang the others at the gradient all-reduce); with 1 replica nothing
changes, batch for batch.

Lightning calls `set_epoch` on `dataloader.batch_sampler.sampler` before every epoch (not on
the batch sampler itself), so `sampler` is an index view that forwards it: a resumed run then
gets the same order as an uninterrupted one.
"""

from __future__ import annotations

import random
from itertools import chain
from typing import Iterator, Sequence

import torch
from torch.utils.data import DataLoader


class _EpochBatches:
    """What Lightning and `ResumableLoader` need of a batch sampler whose order is a pure function of the
    epoch: `set_epoch` (through the `sampler` view), `skip_next` for a resumed epoch, and each `iter`
    serving `batches(epoch)` and advancing the epoch. Subclasses give `batches` and `__len__` (and
    `n_indices` when it is cheaper than listing an epoch's batches)."""

    def __init__(self) -> None:
        self.epoch = 0
        self._skip = 0
        self.sampler = _IndexOrder(self)

    def batches(self, epoch: int) -> list[list[int]]:
        raise NotImplementedError

    def n_indices(self) -> int:
        """How many indices an epoch serves (the `sampler` view's length)."""
        return sum(map(len, self.batches(self.epoch)))

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order the next `iter` gives; each `iter` then advances it."""
        self.epoch = epoch

    def skip_next(self, n_batches: int) -> None:
        """Make the next `iter` start `n_batches` into its epoch (a resumed run: no index of the
        batches already trained on is handed to the loader, so none is collated again)."""
        self._skip = n_batches

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.batches(self.epoch)[self._skip :]
        self.epoch, self._skip = self.epoch + 1, 0
        return iter(batches)


class BucketBatchSampler(_EpochBatches):
    """A `batch_sampler` for `DataLoader` yielding lists of indices of similar length."""

    def __init__(
        self, lengths: Sequence[int], batch_size: int, seed: int, pool_batches: int = 50, drop_last: bool = False,
        num_replicas: int = 1, rank: int = 0,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if pool_batches < 1:
            raise ValueError(f"pool_batches must be >= 1, got {pool_batches}")
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"need num_replicas >= 1 and 0 <= rank < num_replicas, got {num_replicas=}, {rank=}")
        self.lengths = list(lengths)
        self.batch_size, self.seed, self.pool_batches, self.drop_last = batch_size, seed, pool_batches, drop_last
        self.num_replicas, self.rank = num_replicas, rank
        super().__init__()

    def batches(self, epoch: int) -> list[list[int]]:
        """This rank's batches of `epoch` (pure: same (seed, epoch, rank) -> same batches)."""
        batches = self.global_batches(epoch)
        if self.num_replicas == 1:
            return batches
        padded = batches + batches[: -len(batches) % self.num_replicas]  # whole rounds for every rank
        return padded[self.rank :: self.num_replicas]

    def global_batches(self, epoch: int) -> list[list[int]]:
        """Every batch of `epoch`, over all ranks, in order."""
        rng = random.Random(f"{self.seed}/{epoch}")
        order = list(range(len(self.lengths)))
        rng.shuffle(order)
        pool_size = self.batch_size * self.pool_batches
        batches = []
        for start in range(0, len(order), pool_size):
            pool = sorted(order[start : start + pool_size], key=self.lengths.__getitem__)
            batches += [pool[i : i + self.batch_size] for i in range(0, len(pool), self.batch_size)]
        if self.drop_last:
            batches = [b for b in batches if len(b) == self.batch_size]
        rng.shuffle(batches)
        return batches

    def n_indices(self) -> int:
        return len(self.lengths) if self.num_replicas == 1 else super().n_indices()

    def __len__(self) -> int:
        # pools hold whole batches, so only the very last batch can be short
        n = len(self.lengths)
        total = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return -(-total // self.num_replicas)


class _IndexOrder:
    """The indices of the owner's current epoch, flattened: a `Sampler` view with `set_epoch`."""

    def __init__(self, owner: _EpochBatches) -> None:
        self._owner = owner

    def set_epoch(self, epoch: int) -> None:
        self._owner.set_epoch(epoch)

    def __iter__(self) -> Iterator[int]:
        return chain.from_iterable(self._owner.batches(self._owner.epoch))

    def __len__(self) -> int:
        return self._owner.n_indices()


class ReplayedShuffleBatches(_EpochBatches):
    """A `batch_sampler` serving, epoch after epoch, exactly the batches of
    `DataLoader(range(n), batch_size, shuffle=True, generator=Generator().manual_seed(seed))`, but
    each epoch's from (seed, epoch) alone: the LM's training order from before runs could resume,
    now with `BucketBatchSampler`'s protocol (`epoch`, `skip_next`, a `sampler` view taking
    `set_epoch`), so `ResumableLoader` restarts a killed run mid-epoch where it stopped."""

    def __init__(self, n: int, batch_size: int, seed: int) -> None:
        if n < 1 or batch_size < 1:
            raise ValueError(f"need n >= 1 and batch_size >= 1, got {n=}, {batch_size=}")
        self.n, self.batch_size, self.seed = n, batch_size, seed
        super().__init__()

    def batches(self, epoch: int) -> list[list[int]]:
        """Epoch `epoch`'s batches: the shuffling loader replayed from its seed through that epoch (each
        pass draws the loader's base seed, then the permutation, from the one generator)."""
        reference = DataLoader(range(self.n), batch_size=self.batch_size, shuffle=True,
                               generator=torch.Generator().manual_seed(self.seed), collate_fn=list)
        for _ in range(epoch):
            for _ in reference:
                pass
        return [list(batch) for batch in reference]

    def n_indices(self) -> int:
        return self.n

    def __len__(self) -> int:
        return -(-self.n // self.batch_size)
