import math

import pytest
import torch

from headlab.analysis import MeanPatternAccumulator, mean_pattern
from headlab.errors import ConfigError, DataError

from ._patterns import identity, padded_batch, random_rows, uniform


def test_mean_over_sequences_that_have_the_pair():
    """Seq A (2 tokens, uniform) and seq B (3 tokens, identity), map 4 x 4."""
    got = mean_pattern(*padded_batch([[uniform(2)], [identity(3)]], pad_to=5), map_len=4)[0]
    assert got.shape == (4, 4)
    assert got[0, 0].item() == pytest.approx((0.5 + 1.0) / 2)
    assert got[0, 1].item() == pytest.approx((0.5 + 0.0) / 2)
    assert got[2, 2].item() == 1.0 and got[0, 2].item() == 0.0 and got[2, 0].item() == 0.0  # B only
    assert got[3].isnan().all() and got[:, 3].isnan().all()  # no sequence reaches position 3


def test_crops_to_map_len_and_keeps_heads():
    g = torch.Generator().manual_seed(0)
    maps = [[random_rows(6, g), random_rows(6, g)] for _ in range(3)]
    got = mean_pattern(*padded_batch(maps, pad_to=6), map_len=4)
    expected = torch.stack([torch.stack(heads) for heads in maps]).mean(0)[:, :4, :4]
    torch.testing.assert_close(got, expected)


def test_streaming_and_padding_invariance():
    g = torch.Generator().manual_seed(1)
    maps = [[random_rows(n, g)] for n in (3, 7, 5)]
    whole = mean_pattern(*padded_batch(maps, pad_to=7), map_len=8)
    acc = MeanPatternAccumulator(map_len=8)
    acc.update(*padded_batch(maps[:1], pad_to=3))
    acc.update(*padded_batch(maps[1:], pad_to=12))
    torch.testing.assert_close(acc.compute(), whole, equal_nan=True)
    assert acc.compute()[0, 7].isnan().all() and not math.isnan(acc.compute()[0, 6, 6].item())
    acc.reset()
    with pytest.raises(DataError):
        acc.compute()


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_bad_map_len(bad):
    with pytest.raises(ConfigError, match="map_len"):
        MeanPatternAccumulator(map_len=bad)
