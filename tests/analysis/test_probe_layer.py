"""`ProbeLayerAccumulator` (one validation per chunk) equals the three accumulators it replaces."""

import torch

from headlab.analysis import (
    METRIC_NAMES,
    AttentionMetricAccumulator,
    HeadSimilarityAccumulator,
    MeanPatternAccumulator,
    ProbeLayerAccumulator,
)

from ._patterns import pad_positions, padded_batch, random_rows, uniform


def _chunks(dtype):
    g = torch.Generator().manual_seed(0)
    for lengths, pad_to in (((5, 9, 3), 11), ((7, 1, 4, 6), 8)):
        maps = [[random_rows(n, g) for _ in range(3)] + [uniform(n)] for n in lengths]
        pattern, mask = padded_batch(maps, pad_to, seed=len(lengths))
        cls = pad_positions([[True] + [False] * (n - 1) for n in lengths], pad_to)
        yield pattern.to(dtype), mask, cls, cls.roll(2, -1) & mask


def test_equals_the_separate_accumulators():
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        one = ProbeLayerAccumulator(map_len=6)
        metrics, pairs, maps = AttentionMetricAccumulator(), HeadSimilarityAccumulator(), MeanPatternAccumulator(6)
        for pattern, mask, cls, punct in _chunks(dtype):
            one.update(pattern, mask, cls, punct)
            metrics.update(pattern, mask, cls, punct)
            pairs.update(pattern, mask)
            maps.update(pattern, mask)
        got_metrics, got_pairs, got_maps = one.compute()
        want_metrics, want_pairs = metrics.compute(), pairs.compute()
        for name in METRIC_NAMES:
            torch.testing.assert_close(got_metrics[name], want_metrics[name], rtol=tol, atol=tol, msg=name)
        for name in ("js", "corr"):
            torch.testing.assert_close(got_pairs[name], want_pairs[name], rtol=tol, atol=tol, equal_nan=True, msg=name)
        torch.testing.assert_close(got_maps, maps.compute(), rtol=tol, atol=tol, equal_nan=True)


def test_query_masks_equal_conditional_accumulators_over_chunks():
    """Named query sets, streamed over two chunks, equal one `AttentionMetricAccumulator` per set."""
    one = ProbeLayerAccumulator(map_len=6)
    separate = {"even": AttentionMetricAccumulator(), "cls": AttentionMetricAccumulator()}
    for pattern, mask, cls, punct in _chunks(torch.float64):
        positions = torch.arange(mask.shape[1]).expand_as(mask)
        queries = {"even": positions % 2 == 0, "cls": cls}
        one.update(pattern, mask, cls, punct, query_masks=queries)
        for name, acc in separate.items():
            acc.update(pattern, mask, cls, punct, query_mask=queries[name])
    got = one.compute_conditional()
    assert set(got) == {"even", "cls"}
    for name, acc in separate.items():
        want = acc.compute()
        for metric in METRIC_NAMES:
            torch.testing.assert_close(got[name][metric], want[metric], rtol=1e-12, atol=1e-12, equal_nan=True)
    assert got["cls"]["prev_score"].isnan().all()  # [CLS] queries (position 0) have no previous key
    unconditional, _, _ = one.compute()
    assert not torch.allclose(got["even"]["entropy"], unconditional["entropy"])
