"""Named points q, k, v, scores, pattern: they reproduce the pattern by hand and cost the fast path nothing."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from headlab.model import HeadlabClassifier, ModelConfig, MultiHeadSelfAttention
from headlab.model.hooks import capture_patterns
from tests.model._reference import padding_mask, seeded_attention, torch_attention_like

D_MODEL, N_HEADS, D_HEAD = 16, 4, 6  # attention width 24 != d_model: layout errors would show
POINTS = ("hook_q", "hook_k", "hook_v", "hook_scores", "hook_pattern", "hook_z")


def _attention(**kwargs) -> MultiHeadSelfAttention:
    return seeded_attention(D_MODEL, N_HEADS, **kwargs)


def _record(attn: nn.Module) -> tuple[dict[str, torch.Tensor], list]:
    seen: dict[str, torch.Tensor] = {}
    handles = [getattr(attn, name).register_forward_hook(
        lambda module, args, out, name=name: seen.__setitem__(name, out.detach().clone())) for name in POINTS]
    return seen, handles


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("position", ["none", "rope", "alibi"])
def test_scores_and_pattern_follow_from_q_and_k_by_hand(causal, position):
    attn = _attention(d_head=D_HEAD, causal=causal, position=position)
    torch.manual_seed(1)
    x, mask = torch.randn(3, 6, D_MODEL), padding_mask([6, 4, 2], 6)
    seen, _ = _record(attn)
    out = attn(x, mask, need_weights=True)
    q, k, v, scores = seen["hook_q"], seen["hook_k"], seen["hook_v"], seen["hook_scores"]
    assert q.shape == k.shape == v.shape == (3, N_HEADS, 6, D_HEAD) and scores.shape == (3, N_HEADS, 6, 6)
    # the additive bias, built by hand: ALiBi -slope*|i-j| (HeadWeights order), finfo.min on disallowed keys
    i = torch.arange(6)
    bias = torch.zeros(N_HEADS, 6, 6)
    if position == "alibi":
        bias = -attn.alibi_slopes[:, None, None] * (i[None, :] - i[:, None]).abs().float()
    allowed = mask[:, None, None, :] & (i[None, :] <= i[:, None] if causal else torch.ones(6, 6, dtype=torch.bool))
    expected = torch.where(allowed, q @ k.transpose(-2, -1) / math.sqrt(D_HEAD) + bias, torch.finfo(x.dtype).min)
    torch.testing.assert_close(scores, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(scores.softmax(-1), out.pattern)
    torch.testing.assert_close(seen["hook_pattern"], out.pattern)
    torch.testing.assert_close(seen["hook_z"], out.pattern @ v)
    if position != "rope":  # q, k before RoPE are the plain projections
        torch.testing.assert_close(q, attn.q_proj(x).unflatten(-1, (N_HEADS, D_HEAD)).transpose(1, 2))
    else:  # RoPE rotates pairs: a norm-preserving map, so |q| per position matches the projection
        raw = attn.q_proj(x).unflatten(-1, (N_HEADS, D_HEAD)).transpose(1, 2)
        torch.testing.assert_close(q.norm(dim=-1), raw.norm(dim=-1))
        assert not torch.allclose(q, raw)
    torch.testing.assert_close(v, attn.v_proj(x).unflatten(-1, (N_HEADS, D_HEAD)).transpose(1, 2))


def test_hooked_q_k_v_agree_with_torch_multihead_attention():
    attn = _attention()
    ref = torch_attention_like(attn)
    torch.manual_seed(1)
    x, mask = torch.randn(3, 7, D_MODEL), padding_mask([7, 4, 2], 7)
    expected, expected_weights = ref(x, x, x, key_padding_mask=~mask, need_weights=True, average_attn_weights=False)
    seen, _ = _record(attn)
    attn(x, mask, need_weights=True)
    # torch's own decomposition: F.linear with the packed in-projection, split per head
    packed = nn.functional.linear(x, ref.in_proj_weight, ref.in_proj_bias).unflatten(-1, (3, N_HEADS, D_MODEL // N_HEADS))
    for index, name in enumerate(("hook_q", "hook_k", "hook_v")):
        torch.testing.assert_close(seen[name], packed[:, :, index].transpose(1, 2), atol=1e-6, rtol=0)
    real = mask[:, None, :].expand(-1, N_HEADS, -1)
    torch.testing.assert_close(seen["hook_scores"].softmax(-1)[real], expected_weights[real], atol=1e-5, rtol=0)
    z = seen["hook_z"].transpose(1, 2).flatten(2)  # [batch, seq, head * d_head]
    torch.testing.assert_close(ref.out_proj(z)[mask], expected[mask], atol=1e-5, rtol=0)


def test_fast_path_reaches_q_k_v_z_but_never_builds_scores_or_pattern():
    attn = _attention(position="alibi")
    seen, _ = _record(attn)
    torch.manual_seed(2)
    out = attn(torch.randn(2, 5, D_MODEL), padding_mask([5, 3], 5))
    assert out.pattern is None
    assert sorted(seen) == ["hook_k", "hook_q", "hook_v", "hook_z"]


def test_a_hook_can_replace_the_scores():
    """Named points are read-write: forcing every query onto key 0 gives a one-hot pattern."""
    attn = _attention()
    def only_key_0(module, args, scores):
        forced = torch.full_like(scores, -1e9)
        forced[..., 0] = 0.0
        return forced
    attn.hook_scores.register_forward_hook(only_key_0)
    pattern = attn(torch.randn(2, 4, D_MODEL), padding_mask([4, 4], 4), need_weights=True).pattern
    assert (pattern[..., 0] == 1).all() and (pattern[..., 1:] == 0).all()


def test_capture_patterns_equals_the_full_weight_path_forward():
    torch.manual_seed(0)
    net = HeadlabClassifier(ModelConfig(vocab_size=20, n_classes=2, max_len=8, n_layers=3, n_heads=2, d_model=8)).eval()
    ids, mask = torch.randint(1, 20, (4, 8)), padding_mask([8, 5, 3, 1], 8)
    with torch.no_grad():
        full = net(ids, mask, return_patterns=True).patterns
        captured = capture_patterns(net, ids, mask)
    assert len(captured) == 3
    for a, b in zip(captured, full):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    assert not any(m._forward_hooks for block in net.blocks for m in block.attn.modules())  # hooks removed
