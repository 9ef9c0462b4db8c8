import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon

from headlab.analysis import JS_SMOOTHING, HeadSimilarityAccumulator, head_similarity
from headlab.errors import DataError

from ._patterns import identity, one_target, padded_batch, random_rows, uniform


def _smooth(row):
    return JS_SMOOTHING / len(row) + (1 - JS_SMOOTHING) * np.asarray(row)


def _reference(maps):
    """scipy JS (pooled over real queries) and numpy Pearson (per sequence, then mean)."""
    n_heads = len(maps[0])
    js, corr = np.zeros((n_heads, n_heads)), np.zeros((n_heads, n_heads))
    n_queries = sum(m[0].shape[0] for m in maps)
    for heads in maps:
        blocks = [np.asarray(h) for h in heads]
        for a in range(n_heads):
            for b in range(n_heads):
                rows = zip(blocks[a], blocks[b])
                js[a, b] += sum(jensenshannon(_smooth(p), _smooth(q)) ** 2 for p, q in rows)
                corr[a, b] += np.corrcoef(blocks[a].ravel(), blocks[b].ravel())[0, 1] / len(maps)
    return js / n_queries, corr


def _random_maps(seed, lengths=(5, 9, 3, 7), n_heads=4):
    g = torch.Generator().manual_seed(seed)
    return [[random_rows(n, g) for _ in range(n_heads)] for n in lengths]


def test_matches_scipy_and_numpy_references():
    maps = _random_maps(seed=0)
    got = head_similarity(*padded_batch(maps, pad_to=11))
    js, corr = _reference(maps)
    np.testing.assert_allclose(got["js"].numpy(), js, atol=1e-12)
    np.testing.assert_allclose(got["corr"].numpy(), corr, atol=1e-12)


def test_properties_symmetric_zero_diagonal_bounded():
    got = head_similarity(*padded_batch(_random_maps(seed=1), pad_to=9))
    js, corr = got["js"], got["corr"]
    assert torch.equal(js, js.T) and torch.equal(corr, corr.T)
    assert torch.all(js.diagonal() == 0) and torch.all(corr.diagonal() == 1)
    assert js.min() >= 0 and js.max() <= math.log(2)
    assert corr.abs().max() <= 1


def test_identical_heads():
    g = torch.Generator().manual_seed(2)
    maps = [[m, m.clone()] for m in (random_rows(6, g), random_rows(4, g))]
    got = head_similarity(*padded_batch(maps, pad_to=8))
    assert got["js"][0, 1].item() == pytest.approx(0.0, abs=1e-15)
    assert got["corr"][0, 1].item() == pytest.approx(1.0, abs=1e-12)


def test_one_hot_on_different_keys_is_ln2_up_to_smoothing():
    n = 5
    a, b = one_target(torch.zeros(n, dtype=torch.long)), one_target(torch.ones(n, dtype=torch.long))
    got = head_similarity(*padded_batch([[a, b]], pad_to=7))["js"][0, 1].item()
    p = _smooth(np.eye(n)[0])
    q = _smooth(np.eye(n)[1])
    m = (p + q) / 2
    by_hand = 0.5 * np.sum(p * np.log(p / m)) + 0.5 * np.sum(q * np.log(q / m))
    assert got == pytest.approx(by_hand, abs=1e-12)
    assert math.log(2) - 0.01 < got < math.log(2)


def test_padding_does_not_change_result():
    maps = _random_maps(seed=3)
    short = head_similarity(*padded_batch(maps, pad_to=9, seed=1))
    long = head_similarity(*padded_batch(maps, pad_to=20, seed=2))
    for key in ("js", "corr"):
        torch.testing.assert_close(short[key], long[key], rtol=1e-12, atol=1e-12)


def test_constant_map_has_no_correlation_but_diagonal_is_one():
    """Uniform attention has zero variance: its correlation is undefined on every sequence."""
    g = torch.Generator().manual_seed(4)
    maps = [[uniform(n), random_rows(n, g), identity(n)] for n in (4, 6)]
    corr = head_similarity(*padded_batch(maps, pad_to=6))["corr"]
    assert corr[0, 1].isnan() and corr[0, 2].isnan()
    assert corr[0, 0].item() == 1.0
    expected = np.mean([np.corrcoef(np.asarray(m[1]).ravel(), np.asarray(m[2]).ravel())[0, 1] for m in maps])
    assert corr[1, 2].item() == pytest.approx(expected, abs=1e-12)


def test_streaming_chunks_equal_one_batch():
    maps = _random_maps(seed=5)
    whole = head_similarity(*padded_batch(maps, pad_to=9))
    acc = HeadSimilarityAccumulator()
    for lo, hi in [(0, 1), (1, 3), (3, 4)]:
        acc.update(*padded_batch(maps[lo:hi], pad_to=max(m[0].shape[0] for m in maps[lo:hi])))
    streamed = acc.compute()
    for key in ("js", "corr"):
        torch.testing.assert_close(streamed[key], whole[key], rtol=1e-12, atol=1e-12)
    acc.reset()
    with pytest.raises(DataError):
        acc.compute()


def test_rejects_scores_instead_of_probabilities():
    pattern, mask = padded_batch(_random_maps(seed=6), pad_to=9)
    with pytest.raises(DataError, match="sum to 1"):
        head_similarity(pattern.log(), mask)
