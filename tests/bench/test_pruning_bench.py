"""The pruning benchmark section: the pair it times and the ratios it reports."""

import argparse

import pytest
import torch

from benchmarks.pruning import build_pair, measure


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model on a shared machine: extra threads only spin
    yield
    torch.set_num_threads(before)


def test_pruning_section_times_the_same_network_with_heads_removed():
    args = argparse.Namespace(vocab=50, seq=16, layers=2, heads=4, d_model=32, ff=64, prune_fraction=0.25,
                              device="cpu", steps=2, warmup=1)
    full, pruned = build_pair(args)
    assert full.heads_per_layer == [4, 4] and pruned.heads_per_layer == [3, 3]
    gates = torch.ones(2, 4)
    gates[:, 0] = 0.0  # build_pair removes the first heads of every layer
    ids = torch.randint(1, 50, (3, 16))
    mask = torch.ones_like(ids, dtype=torch.bool)
    with torch.no_grad():
        torch.testing.assert_close(pruned(ids, mask).logits, full(ids, mask, head_gates=gates).logits, atol=1e-5, rtol=0)
    result = measure(full, pruned, args, args.seq, args.vocab)
    assert result["fraction_heads_removed"] == pytest.approx(0.25)
    assert [r["batch"] for r in result["rows"]] == [1, 64]
    for row in result["rows"]:
        assert len(row["ms_all"]["pruned"]) == 2
        assert row["speedup"] == pytest.approx(row["unpruned_ms"] / row["pruned_ms"])
