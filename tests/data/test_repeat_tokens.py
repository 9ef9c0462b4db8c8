"""repeat_tokens: one recurring segment at random offsets (or the fixed-offset control), seeded."""

from __future__ import annotations

import pytest
import torch

from headlab.data.repeat_tokens import BOS_ID, induction_probe, repeat_token_batch
from headlab.errors import ConfigError, DataError


def _segments(row: torch.Tensor, length: int) -> list[tuple[int, int]]:
    """(start, copy) pairs with row[start:start+length] == row[copy:copy+length], copy >= start + length."""
    n = row.numel()
    return [(s, c) for s in range(1, n - length) for c in range(s + length, n - length + 1)
            if torch.equal(row[s:s + length], row[c:c + length])]


def test_every_row_holds_a_repeat_at_varying_offsets():
    g = torch.Generator().manual_seed(0)
    tokens = repeat_token_batch(64, vocab_size=50, seq_len=32, min_segment=4, max_segment=8, generator=g)
    assert tokens.shape == (64, 32) and (tokens[:, 0] == BOS_ID).all() and (tokens[:, 1:] >= 1).all()
    offsets = set()
    for row in tokens:
        found = _segments(row, 4)
        assert found, row
        offsets.add(found[0][1] - found[0][0])
    assert len(offsets) > 5  # no single offset: a positional head cannot solve it


def test_fixed_offset_control_repeats_at_that_offset():
    g = torch.Generator().manual_seed(1)
    tokens = repeat_token_batch(16, vocab_size=50, seq_len=32, min_segment=6, max_segment=6, generator=g, fixed_offset=10)
    for row in tokens:
        assert any(c - s == 10 for s, c in _segments(row, 6))


def test_same_seed_same_tokens():
    a = repeat_token_batch(4, 20, 16, 2, 5, torch.Generator().manual_seed(3))
    b = repeat_token_batch(4, 20, 16, 2, 5, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)


def test_probe_is_a_block_repeated():
    probe = induction_probe(3, 30, 5, torch.Generator().manual_seed(0))
    assert probe.shape == (3, 11) and (probe[:, 0] == BOS_ID).all()
    assert torch.equal(probe[:, 1:6], probe[:, 6:])


@pytest.mark.parametrize("kwargs, key", [({"max_segment": 20}, "data.max_segment"), ({"vocab_size": 2}, "data.vocab_size"),
                                         ({"fixed_offset": 2}, "data.fixed_offset")])
def test_bad_keys_name_the_key(kwargs, key):
    args = {"n": 2, "vocab_size": 20, "seq_len": 32, "min_segment": 4, "max_segment": 8, **kwargs}
    with pytest.raises(ConfigError, match=key):
        repeat_token_batch(generator=torch.Generator().manual_seed(0), **args)


def test_probe_with_gaps_varies_the_repeat_distance_and_ends_with_the_block():
    probe = induction_probe(64, 30, 8, torch.Generator().manual_seed(0), max_gap=16)
    assert probe.shape == (64, 33)
    distances = set()
    for row in probe:
        second = row[-8:]
        starts = [s for s in range(1, 1 + 16 + 1) if torch.equal(row[s:s + 8], second)]
        assert starts
        distances.add(33 - 8 - starts[0])
    assert len(distances) > 8


def test_reviews_lm_windows_and_probe_use_the_reviews_characters():
    from headlab.data.lm_datamodule import ReviewsLMDataModule
    from headlab.data.tokenizer import CLS_ID, SPECIAL_TOKENS

    data = ReviewsLMDataModule(max_len=33, probe_half_len=8, probe_max_gap=16, probe_size=4)
    assert data.splits["train"].shape[1] == 33 and data.splits["train"].shape[0] > 10 * data.splits["val"].shape[0]
    assert (data.splits["train"] == CLS_ID).any()  # review starts are marked
    assert (data.probe[:, 0] == CLS_ID).all() and data.probe[:, 1:].min() >= len(SPECIAL_TOKENS)
    assert data.probe[:, 1:].max() < data.vocab_size
    for row in data.probe:  # the last block occurred earlier
        assert any(torch.equal(row[s:s + 8], row[-8:]) for s in range(1, 18))
    assert data.vocab_size > 1000  # thousands of distinct characters in the reviews
    # the probe draws from the 256 most frequent train characters: none rarer than any left out
    counts = torch.bincount(data.splits["train"].reshape(-1), minlength=data.vocab_size)
    chosen = torch.zeros(data.vocab_size, dtype=torch.bool)
    chosen[data.probe_ids] = True
    assert chosen.sum() == 256 and not chosen[: len(SPECIAL_TOKENS)].any()
    assert counts[chosen].min() >= counts[~chosen][len(SPECIAL_TOKENS):].max()  # none left out is more frequent
    assert set(data.probe[:, 1:].unique().tolist()) <= set(data.probe_ids.tolist())
    assert counts[data.probe[:, 1:]].min() > 500  # every probe character is common in train


def test_text_probe_repeats_a_window_of_the_held_out_stream_by_hand():
    from headlab.data.repeat_tokens import text_induction_probe

    ids = torch.arange(10, 40)  # a stream whose every window is recognisable
    probe = text_induction_probe(ids, 6, 4, torch.Generator().manual_seed(0), max_gap=3)
    assert probe.shape == (6, 1 + 3 + 2 * 4) and (probe[:, 0] == BOS_ID).all()
    for row in probe[:, 1:]:
        block = row[-4:]
        assert torch.equal(block, torch.arange(int(block[0]), int(block[0]) + 4))  # consecutive stream tokens
        inside = [s for s in range(0, 4) if torch.equal(row[s:s + 4], block)]
        filler = torch.cat([row[:inside[0]], row[inside[0] + 4:-4]])
        assert torch.equal(filler, torch.arange(int(block[-1]) + 1, int(block[-1]) + 4))  # the text that follows it
    with pytest.raises(DataError, match="more than probe_half_len"):
        text_induction_probe(torch.arange(5), 2, 4, torch.Generator(), max_gap=1)


def test_a_held_out_probe_is_made_of_the_val_texts_never_of_train():
    from headlab.data.lm_datamodule import ReviewsLMDataModule

    data = ReviewsLMDataModule(max_len=33, probe_half_len=8, probe_max_gap=16, probe_size=4, probe_source="held_out")
    val = data.splits["val"].reshape(-1).tolist()
    for row in data.probe:
        block = row[-8:].tolist()
        assert any(val[i:i + 8] == block for i in range(len(val) - 7))  # a window of the held-out text, repeated
    with pytest.raises(ConfigError, match="data.probe_source"):
        ReviewsLMDataModule(max_len=33, probe_half_len=8, probe_max_gap=16, probe_source="train")
