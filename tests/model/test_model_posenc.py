"""Position encodings against their formulas, computed by hand."""

from __future__ import annotations

import math

import pytest
import torch

from headlab.model import MultiHeadSelfAttention
from headlab.model.posenc import (
    LearnedEncoding,
    RotaryEmbedding,
    SinusoidalEncoding,
    alibi_slopes,
    sinusoidal_table,
)


def test_sinusoidal_values_match_the_formula():
    table = sinusoidal_table(max_len=10, d_model=6)
    assert table[0].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    assert table[3, 0].item() == pytest.approx(math.sin(3.0))
    assert table[3, 1].item() == pytest.approx(math.cos(3.0))
    assert table[7, 2].item() == pytest.approx(math.sin(7 / 10000 ** (2 / 6)))
    assert table[7, 5].item() == pytest.approx(math.cos(7 / 10000 ** (4 / 6)))
    odd = sinusoidal_table(max_len=4, d_model=5)  # last column is a sine, no cosine partner
    assert odd[2, 4].item() == pytest.approx(math.sin(2 / 10000 ** (4 / 5)))


def test_sinusoidal_encoding_adds_the_table():
    x = torch.randn(2, 5, 6)
    torch.testing.assert_close(SinusoidalEncoding(10, 6)(x) - x, sinusoidal_table(10, 6)[:5].expand(2, -1, -1))


def test_learned_encoding_adds_a_trainable_table():
    enc = LearnedEncoding(max_len=8, d_model=4)
    x = torch.zeros(2, 3, 4)
    torch.testing.assert_close(enc(x), enc.embedding.weight[:3].expand(2, -1, -1))
    enc(x)[:, 1].sum().backward()
    grad = enc.embedding.weight.grad
    assert enc.embedding.weight.requires_grad
    torch.testing.assert_close(grad[1], torch.full((4,), 2.0))  # position 1, twice (batch of 2)
    assert (grad[[0, 2, 3]] == 0).all()


def test_rope_rotates_each_pair_by_position_times_frequency():
    rope = RotaryEmbedding(d_head=2)  # one pair, frequency 1: position p turns by p radians
    x = torch.tensor([1.0, 0.5]).expand(1, 1, 4, 2)
    out = rope(x)[0, 0]  # [seq, 2]
    for p in range(4):
        c, s = math.cos(p), math.sin(p)
        assert out[p].tolist() == pytest.approx([1.0 * c - 0.5 * s, 0.5 * c + 1.0 * s], abs=1e-6)


def test_rope_scores_depend_only_on_relative_offset():
    torch.manual_seed(0)
    rope = RotaryEmbedding(d_head=8)
    seq = 9
    q = torch.randn(8).expand(1, 1, seq, 8)  # the same query vector at every position
    k = torch.randn(8).expand(1, 1, seq, 8)
    scores = (rope(q) @ rope(k).transpose(-2, -1))[0, 0]  # [q, k]
    for shift in (1, 3):
        torch.testing.assert_close(scores[shift:, shift:], scores[:-shift, :-shift], atol=1e-5, rtol=0)
    offsets = torch.stack([scores[0, 0], scores[0, 1], scores[0, 3], scores[3, 0]])
    assert offsets.unique().numel() == 4  # ... but does depend on it (and on its sign)
    torch.testing.assert_close(rope(q).norm(dim=-1), q.norm(dim=-1))  # a rotation keeps norms


def test_alibi_slopes_follow_press_et_al():
    assert alibi_slopes(4).tolist() == [2**-2, 2**-4, 2**-6, 2**-8]
    assert alibi_slopes(8).tolist() == [2.0**-k for k in range(1, 9)]
    # 6 heads: the 4-head slopes, then every other 8-head slope
    assert alibi_slopes(6).tolist() == [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3]


def test_alibi_pattern_with_zero_query_key_weights_is_softmax_of_the_bias():
    attn = MultiHeadSelfAttention(8, 2, position="alibi").eval()
    with torch.no_grad():
        for proj in (attn.q_proj, attn.k_proj):
            proj.weight.zero_()
            proj.bias.zero_()
    x = torch.randn(1, 5, 8)
    mask = torch.tensor([[True, True, True, True, False]])
    pattern = attn(x, mask, need_weights=True).pattern[0]  # [head, q, k]
    for h, slope in enumerate([2.0**-4, 2.0**-8]):  # 2 heads: 2^(-8*1/2), 2^(-8*2/2)
        for i in range(5):
            logits = [-slope * abs(i - j) for j in range(4)]
            expected = [math.exp(v) / sum(math.exp(u) for u in logits) for v in logits] + [0.0]
            assert pattern[h, i].tolist() == pytest.approx(expected, abs=1e-6)
