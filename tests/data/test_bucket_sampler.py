"""BucketBatchSampler: every index once per epoch, seeded, less padding than random batches."""

from __future__ import annotations

import random

from lightning.fabric.utilities.data import _set_sampler_epoch
from torch.utils.data import DataLoader

from headlab.data import BucketBatchSampler

_RNG = random.Random(0)
LENGTHS = [_RNG.randint(2, 200) for _ in range(1000)]


def test_every_index_once_per_epoch():
    sampler = BucketBatchSampler(LENGTHS, batch_size=32, seed=0, pool_batches=4)
    for _ in range(3):
        batches = list(sampler)
        flat = [i for b in batches for i in b]
        assert sorted(flat) == list(range(len(LENGTHS)))
        assert len(batches) == len(sampler) == 32  # ceil(1000 / 32)
        assert sum(len(b) < 32 for b in batches) == 1


def test_drop_last():
    sampler = BucketBatchSampler(LENGTHS, batch_size=32, seed=0, drop_last=True)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 1000 // 32 and all(len(b) == 32 for b in batches)


def test_seeded_and_epochs_differ():
    a = BucketBatchSampler(LENGTHS, 32, seed=7)
    b = BucketBatchSampler(LENGTHS, 32, seed=7)
    assert [list(a), list(a)] == [list(b), list(b)]
    assert a.batches(0) != a.batches(1)
    assert BucketBatchSampler(LENGTHS, 32, seed=8).batches(0) != a.batches(0)


def test_less_padding_than_random_batches():
    sampler = BucketBatchSampler(LENGTHS, 32, seed=0)
    rng = random.Random(0)
    order = list(range(len(LENGTHS)))
    rng.shuffle(order)
    random_batches = [order[i : i + 32] for i in range(0, len(order), 32)]

    def padding(batches):
        return sum(max(LENGTHS[i] for i in b) * len(b) - sum(LENGTHS[i] for i in b) for b in batches)

    assert padding(sampler.batches(0)) < 0.2 * padding(random_batches)


def test_lightning_sets_the_epoch_through_the_dataloader():
    sampler = BucketBatchSampler(LENGTHS, 32, seed=0)
    loader = DataLoader(list(range(len(LENGTHS))), batch_sampler=sampler)
    _set_sampler_epoch(loader, 5)
    assert sampler.epoch == 5
    assert [b.tolist() for b in loader] == sampler.batches(5)
    assert sorted(loader.sampler) == list(range(len(LENGTHS)))  # the index view covers every index


def test_skip_next_starts_one_epoch_later_in_its_order_then_resets():
    sampler = BucketBatchSampler(LENGTHS, 32, seed=0)
    full = sampler.batches(0)
    sampler.skip_next(3)
    assert list(sampler) == full[3:]  # epoch 0, from its 4th batch
    assert list(sampler) == sampler.batches(1)  # epoch 1 whole again


def test_resumed_loader_never_collates_the_batches_it_skips():
    from headlab.data.datamodule import ResumableLoader

    collated = []

    def collate(items):
        collated.append(items)
        return items

    sampler = BucketBatchSampler(LENGTHS, 32, seed=0)
    loader = ResumableLoader(list(range(len(LENGTHS))), batch_sampler=sampler, collate_fn=collate)
    loader.load_state_dict({"epoch": 0, "batches": 2})
    served = list(loader)
    assert served == sampler.batches(0)[2:] and collated == served  # nothing collated for the 2 skipped
    assert loader.state_dict() == {"epoch": 0, "batches": len(sampler)}


def test_ranks_split_one_global_order_into_equal_shares():
    """Under DDP every rank takes every k-th batch of the same global order; the order is padded by
    wrapping so all ranks run the same number of steps (an uneven count would hang DDP)."""
    global_order = BucketBatchSampler(LENGTHS, 32, seed=3).batches(0)  # 32 batches
    for replicas in (2, 3, 5):
        shards = [BucketBatchSampler(LENGTHS, 32, seed=3, num_replicas=replicas, rank=r) for r in range(replicas)]
        per_rank = [s.batches(0) for s in shards]
        n = -(-len(global_order) // replicas)
        assert [len(b) for b in per_rank] == [n] * replicas == [len(s) for s in shards]
        interleaved = [per_rank[i % replicas][i // replicas] for i in range(n * replicas)]
        assert interleaved[: len(global_order)] == global_order
        assert interleaved[len(global_order):] == global_order[: n * replicas - len(global_order)]  # the wrap
        covered = {i for b in interleaved for i in b}
        assert covered == set(range(len(LENGTHS)))


def test_one_replica_is_the_single_process_order():
    assert BucketBatchSampler(LENGTHS, 32, seed=3, num_replicas=1, rank=0).batches(2) == BucketBatchSampler(LENGTHS, 32, seed=3).batches(2)


def test_bad_rank_is_refused():
    import pytest

    with pytest.raises(ValueError, match="rank"):
        BucketBatchSampler(LENGTHS, 32, seed=0, num_replicas=2, rank=2)


def test_replayed_shuffle_serves_what_a_seeded_shuffling_loader_serves_epoch_after_epoch():
    """The LM's train order: each epoch's batches are those of `DataLoader(shuffle=True, generator=seeded)`
    on its (epoch+1)-th pass, computed from (seed, epoch), and a skip starts an epoch mid-way."""
    import torch
    from torch.utils.data import DataLoader

    from headlab.data.sampler import ReplayedShuffleBatches

    plain = DataLoader(range(50), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(3), collate_fn=list)
    epochs = [[list(b) for b in plain] for _ in range(3)]
    replayed = ReplayedShuffleBatches(50, 8, seed=3)
    assert len(replayed) == 7 and [list(replayed) for _ in range(3)] == epochs  # each iter advances the epoch
    replayed.set_epoch(1)
    replayed.skip_next(5)
    assert list(replayed) == epochs[1][5:] and replayed.epoch == 2
    assert sorted(i for b in epochs[2] for i in b) == list(range(50)) and epochs[1] != epochs[2]
    replayed.sampler.set_epoch(2)  # the view Lightning calls set_epoch on
    assert list(replayed.sampler) == [i for b in epochs[2] for i in b] and len(replayed.sampler) == 50
