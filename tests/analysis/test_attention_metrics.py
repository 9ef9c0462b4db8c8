import math

import numpy as np
import pytest
import torch

from headlab.analysis import METRIC_NAMES, AttentionMetricAccumulator, attention_metric_sums, attention_metrics
from headlab.errors import DataError

from ._patterns import identity, pad_positions, padded_batch, previous_token, random_rows, uniform


def _single(maps, pad_to=None, **masks):
    """Metrics of one sequence whose heads are `maps`, padded to `pad_to`."""
    n = maps[0].shape[0]
    pattern, mask = padded_batch([maps], pad_to or n)
    return attention_metrics(pattern, mask, **masks)


@pytest.mark.parametrize("n, pad_to", [(1, 3), (5, 5), (7, 12)])
def test_uniform_attention(n, pad_to):
    m = _single([uniform(n)], pad_to)
    assert m["entropy"].item() == pytest.approx(math.log(n), abs=1e-12)
    assert m["entropy_norm"].item() == pytest.approx(1.0 if n > 1 else 0.0)
    assert m["distance_norm"].item() == pytest.approx(1.0)
    assert m["confidence"].item() == pytest.approx(1.0 / n)
    assert m["self_score"].item() == pytest.approx(1.0 / n)
    expected_distance = np.mean([np.mean([abs(i - j) for j in range(n)]) for i in range(n)])
    assert m["mean_distance"].item() == pytest.approx(expected_distance)
    assert m["argmax_distance"].item() == pytest.approx(np.mean(range(n)))  # ties -> first key (0)


def test_identity_attention():
    m = _single([identity(6)], pad_to=9)
    for name, value in [("mean_distance", 0), ("argmax_distance", 0), ("self_score", 1), ("entropy", 0),
                        ("distance_norm", 0), ("prev_score", 0), ("next_score", 0), ("confidence", 1)]:
        assert m[name].item() == pytest.approx(value, abs=1e-12), name


def test_previous_token_attention():
    n = 8
    m = _single([previous_token(n)], pad_to=11)
    assert m["prev_score"].item() == 1.0  # counted only over queries 1..n-1, which have a previous token
    assert m["self_score"].item() == pytest.approx(1.0 / n)  # query 0 attends to itself
    assert m["next_score"].item() == 0.0
    assert m["mean_distance"].item() == pytest.approx((n - 1) / n)  # 1 for every query that can move
    assert m["argmax_distance"].item() == pytest.approx((n - 1) / n)


def test_padding_is_ignored():
    g = torch.Generator().manual_seed(1)
    maps = [[random_rows(7, g), random_rows(7, g)], [random_rows(4, g), random_rows(4, g)]]
    cls = pad_positions([[True] + [False] * 6, [True, False, False, False]], 10)
    short_pattern, short_mask = padded_batch(maps, 10, seed=2)
    long_pattern, long_mask = padded_batch(maps, 20, seed=3)
    short = attention_metrics(short_pattern, short_mask, cls_mask=cls, punct_mask=cls.roll(1, -1))
    cls20 = torch.nn.functional.pad(cls, (0, 10))
    long = attention_metrics(long_pattern, long_mask, cls_mask=cls20, punct_mask=cls20.roll(1, -1))
    for name in METRIC_NAMES:
        torch.testing.assert_close(short[name], long[name], msg=name)


def test_mixed_lengths_pool_real_queries():
    """Seq A: 2 tokens, uniform (2 queries); seq B: 4 tokens, identity (4 queries)."""
    pattern, mask = padded_batch([[uniform(2)], [identity(4)]], pad_to=4)
    m = attention_metrics(pattern, mask)
    assert m["entropy"].item() == pytest.approx(2 * math.log(2) / 6)  # pooled over 6 queries
    assert m["self_score"].item() == pytest.approx((0.5 + 0.5 + 4 * 1.0) / 6)
    # prev: queries with a previous token are A1 (0.5) and B1..B3 (0 each): 4 queries, not 6
    assert m["prev_score"].item() == pytest.approx(0.5 / 4)
    assert m["next_score"].item() == pytest.approx(0.5 / 4)
    assert m["confidence"].item() == pytest.approx((0.5 + 0.5 + 4) / 6)


def test_special_token_masses_and_union():
    """[CLS] a b '.': the final '.' is both punctuation and the last token; the union counts it once."""
    row = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    pattern, mask = padded_batch([[row.expand(4, 4).clone()]], pad_to=6)
    cls = pad_positions([[True, False, False, False]], 6)
    punct = pad_positions([[False, False, False, True]], 6)
    m = attention_metrics(pattern, mask, cls_mask=cls, punct_mask=punct)
    assert m["cls_attention"].item() == pytest.approx(0.1)
    assert m["punct_attention"].item() == pytest.approx(0.4)
    assert m["last_attention"].item() == pytest.approx(0.4)
    assert m["special_attention"].item() == pytest.approx(0.5)
    without = attention_metrics(pattern, mask)
    assert without["cls_attention"].isnan().all() and without["punct_attention"].isnan().all()
    assert without["special_attention"].item() == pytest.approx(0.4)  # last token only


def _reference(maps, cls_flags, punct_flags, query_flags=None):
    """Loop-by-loop numpy metrics, pooling real queries of all sequences (independent of the einsums).

    `query_flags`: per sequence, which queries count (default all).
    """
    values = {k: [[] for _ in range(len(maps[0]))] for k in METRIC_NAMES}
    query_flags = query_flags or [[True] * len(c) for c in cls_flags]
    for heads, cls, punct, chosen in zip(maps, cls_flags, punct_flags, query_flags):
        n = heads[0].shape[0]
        special = np.array(cls) | np.array(punct) | (np.arange(n) == n - 1)
        for h, a in enumerate(np.asarray(torch.stack(heads))):
            for i in (i for i in range(n) if chosen[i]):
                row, d = a[i], np.abs(i - np.arange(n))
                ent = -sum(p * math.log(p) for p in row if p > 0)
                values["entropy"][h].append(ent)
                values["entropy_norm"][h].append(ent / math.log(n) if n > 1 else 0.0)
                values["mean_distance"][h].append(row @ d)
                values["argmax_distance"][h].append(abs(i - int(np.argmax(row))))
                values["distance_norm"][h].append(row @ d / d.mean() if n > 1 else 1.0)
                values["self_score"][h].append(row[i])
                if i >= 1:
                    values["prev_score"][h].append(row[i - 1])
                if i + 1 < n:
                    values["next_score"][h].append(row[i + 1])
                values["cls_attention"][h].append(row[np.array(cls)].sum())
                values["punct_attention"][h].append(row[np.array(punct)].sum())
                values["last_attention"][h].append(row[n - 1])
                values["special_attention"][h].append(row[special].sum())
                values["confidence"][h].append(row.max())
    return {k: np.array([np.mean(v) for v in per_head]) for k, per_head in values.items()}


def _random_probe(seed, lengths=(6, 1, 9, 3, 7), n_heads=3):
    g = torch.Generator().manual_seed(seed)
    maps = [[random_rows(n, g) for _ in range(n_heads)] for n in lengths]
    cls = [[j == 0 for j in range(n)] for n in lengths]
    punct = [[bool(x) for x in (torch.rand(n, generator=g) < 0.3)] for n in lengths]
    return maps, cls, punct


def test_matches_loop_reference_on_random_patterns():
    maps, cls, punct = _random_probe(seed=4)
    pad_to = max(len(c) for c in cls) + 2
    pattern, mask = padded_batch(maps, pad_to)
    got = attention_metrics(pattern, mask, pad_positions(cls, pad_to), pad_positions(punct, pad_to))
    expected = _reference(maps, cls, punct)
    for name in METRIC_NAMES:
        np.testing.assert_allclose(got[name].numpy(), expected[name], rtol=1e-10, atol=1e-12, err_msg=name)


def test_query_mask_averages_only_the_chosen_queries():
    maps, cls, punct = _random_probe(seed=6)
    g = torch.Generator().manual_seed(7)
    chosen = [[bool(x) for x in (torch.rand(len(c), generator=g) < 0.5)] for c in cls]
    chosen[0][1] = True  # at least one query with a previous and a next key
    pad_to = max(len(c) for c in cls) + 2
    pattern, mask = padded_batch(maps, pad_to)
    query_mask = pad_positions(chosen, pad_to) | ~mask  # padded queries marked too: must still not count
    got = attention_metrics(pattern, mask, pad_positions(cls, pad_to), pad_positions(punct, pad_to), query_mask=query_mask)
    expected = _reference(maps, cls, punct, chosen)
    for name in METRIC_NAMES:
        np.testing.assert_allclose(got[name].numpy(), expected[name], rtol=1e-10, atol=1e-12, err_msg=name)
    everything = attention_metrics(pattern, mask, query_mask=torch.ones_like(mask))
    assert all(torch.equal(everything[k], attention_metrics(pattern, mask)[k]) for k in ("prev_score", "entropy"))


def test_query_mask_sees_a_head_that_is_previous_token_for_one_marker_only():
    """Queries 2 and 5 read the token before them, every other query spreads: the head is a
    previous-token head for the markers although its average over all queries is small."""
    n = 8
    rows = torch.full((n, n), 1.0 / n)
    for i in (2, 5):
        rows[i] = torch.nn.functional.one_hot(torch.tensor(i - 1), n).double()
    pattern = rows.reshape(1, 1, n, n)
    mask = torch.ones(1, n, dtype=torch.bool)
    markers = torch.zeros(1, n, dtype=torch.bool)
    markers[0, [2, 5]] = True
    on_markers = attention_metrics(pattern, mask, query_mask=markers)
    assert on_markers["prev_score"].item() == 1.0 and on_markers["mean_distance"].item() == 1.0
    assert on_markers["next_score"].item() == 0.0 and on_markers["confidence"].item() == 1.0
    overall = attention_metrics(pattern, mask)["prev_score"].item()
    assert overall == pytest.approx((2 * 1.0 + 5 * (1 / n)) / 7)  # 7 queries have a previous key


def test_query_mask_with_no_chosen_query_gives_nan():
    pattern = torch.full((1, 2, 3, 3), 1 / 3)
    got = attention_metrics(pattern, torch.ones(1, 3, dtype=torch.bool), query_mask=torch.zeros(1, 3, dtype=torch.bool))
    assert all(v.isnan().all() for v in got.values())


def test_streaming_chunks_equal_one_batch():
    maps, cls, punct = _random_probe(seed=5)
    full_len = max(len(c) for c in cls)
    whole_masks = pad_positions(cls, full_len), pad_positions(punct, full_len)
    whole = attention_metrics(*padded_batch(maps, full_len), *whole_masks)
    acc = AttentionMetricAccumulator()
    for lo, hi in [(0, 2), (2, 3), (3, 5)]:  # each chunk padded only to its own max length
        pad = max(len(c) for c in cls[lo:hi])
        pattern, mask = padded_batch(maps[lo:hi], pad, seed=lo)
        acc.update(pattern, mask, pad_positions(cls[lo:hi], pad), pad_positions(punct[lo:hi], pad))
    streamed = acc.compute()
    for name in METRIC_NAMES:
        torch.testing.assert_close(streamed[name], whole[name], rtol=1e-12, atol=1e-12, msg=name)
    acc.reset()
    with pytest.raises(DataError):
        acc.compute()


def test_sums_are_per_head_with_own_counts():
    pattern, mask = padded_batch([[uniform(3), identity(3)], [uniform(2), identity(2)]], pad_to=3)
    sums = attention_metric_sums(pattern, mask)
    assert sums.counts["entropy"].tolist() == [5.0, 5.0]
    assert sums.counts["prev_score"].tolist() == [3.0, 3.0]
    assert sums.counts["cls_attention"].tolist() == [0.0, 0.0]
    assert sums.sums["self_score"].tolist() == pytest.approx([3 * (1 / 3) + 2 * 0.5, 5.0])


def test_float32_and_int_mask_accepted():
    pattern, mask = padded_batch([[uniform(4)]], pad_to=6)
    m = attention_metrics(pattern.float(), mask.long())
    assert m["entropy"].dtype == torch.float64
    assert m["entropy"].item() == pytest.approx(math.log(4), rel=1e-6)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda p, m: (torch.randn_like(p), m), "sum to 1"),  # pre-softmax scores
        (lambda p, m: (p, m[:, :-1]), "attention_mask"),
        (lambda p, m: (p[..., :-1], m), "q == k"),
        (lambda p, m: (p[0], m), r"\[batch, head, q, k\]"),
        (lambda p, m: (p, m.double()), "0/1"),
        (lambda p, m: (p, m.index_fill(1, torch.tensor([2]), False)), "sum to 1"),  # not the model's mask
    ],
)
def test_bad_inputs_raise_data_error(make, match):
    pattern, mask = padded_batch([[uniform(3)], [uniform(5)]], pad_to=5)
    with pytest.raises(DataError, match=match):
        attention_metrics(*make(pattern, mask))


def test_accumulator_rejects_other_head_count():
    acc = AttentionMetricAccumulator()
    acc.update(*padded_batch([[uniform(3), uniform(3)]], 3))
    with pytest.raises(DataError, match="2 heads"):
        acc.update(*padded_batch([[uniform(3)]], 3))


def test_query_mask_of_wrong_shape_is_named():
    pattern = torch.full((1, 1, 3, 3), 1 / 3)
    with pytest.raises(DataError, match="query_mask"):
        attention_metrics(pattern, torch.ones(1, 3, dtype=torch.bool), query_mask=torch.ones(1, 4, dtype=torch.bool))
