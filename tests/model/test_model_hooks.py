"""Named points as TransformerLens has them: names, layouts, `fn(tensor, hook)` hooks, `run_with_hooks`.

They reproduce the pattern by hand, agree with torch's own attention, cost the fast path nothing,
and a hook written as a TransformerLens tutorial writes it gives what headlab's own gate gives.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from headlab.errors import HeadlabError
from headlab.model import HeadlabClassifier, ModelConfig, MultiHeadSelfAttention
from headlab.model.hooks import HookPoint, capture_patterns, hooks
from tests.model._reference import padding_mask, seeded_attention, torch_attention_like

D_MODEL, N_HEADS, D_HEAD = 16, 4, 6  # attention width 24 != d_model: layout errors would show
PER_HEAD = ("hook_q", "hook_k", "hook_v", "hook_z")  # TransformerLens: [batch, pos, head_index, d_head]
MAPS = ("hook_attn_scores", "hook_pattern")  # TransformerLens: [batch, head_index, query_pos, key_pos]
ROTATED = ("hook_rot_q", "hook_rot_k")  # TransformerLens: only in a rotary model, [batch, pos, head_index, d_head]


def _attention(**kwargs) -> MultiHeadSelfAttention:
    return seeded_attention(D_MODEL, N_HEADS, **kwargs)


def _record(attn: nn.Module) -> tuple[dict[str, torch.Tensor], list]:
    """Every named point's output, through plain PyTorch forward hooks (they keep working)."""
    seen: dict[str, torch.Tensor] = {}
    handles = [point.register_forward_hook(
        lambda module, args, out, name=name: seen.__setitem__(name, out.detach().clone()))
        for name, point in attn.named_children() if isinstance(point, HookPoint)]
    return seen, handles


def _split(t: torch.Tensor) -> torch.Tensor:
    """[batch, seq, head * d_head] -> [batch, pos, head_index, d_head], by hand."""
    return t.view(t.shape[0], t.shape[1], -1, D_HEAD)


def _net(**kwargs) -> HeadlabClassifier:
    torch.manual_seed(0)
    config = dict(vocab_size=20, n_classes=3, max_len=8, n_layers=2, n_heads=N_HEADS, d_model=D_MODEL, dropout=0.0)
    return HeadlabClassifier(ModelConfig(**{**config, **kwargs})).eval()


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    return torch.randint(1, 20, (3, 8), generator=gen), padding_mask([8, 5, 2], 8)


@pytest.mark.parametrize("position", ["none", "rope", "alibi"])
def test_every_point_has_transformerlens_layout(position):
    attn = _attention(d_head=D_HEAD, position=position)
    seen, _ = _record(attn)
    torch.manual_seed(1)
    attn(torch.randn(3, 7, D_MODEL), padding_mask([7, 4, 2], 7), need_weights=True)
    expected = {**{name: (3, 7, N_HEADS, D_HEAD) for name in PER_HEAD}, **{name: (3, N_HEADS, 7, 7) for name in MAPS}}
    if position == "rope":
        expected.update({name: (3, 7, N_HEADS, D_HEAD) for name in ROTATED})
    assert {name: tuple(t.shape) for name, t in seen.items()} == expected


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("position", ["none", "rope", "alibi"])
def test_scores_and_pattern_follow_from_q_and_k_by_hand(causal, position):
    attn = _attention(d_head=D_HEAD, causal=causal, position=position)
    torch.manual_seed(1)
    x, mask = torch.randn(3, 6, D_MODEL), padding_mask([6, 4, 2], 6)
    seen, _ = _record(attn)
    out = attn(x, mask, need_weights=True)
    # q, k, v are the plain projections split per head; the scores use the rotated q, k under RoPE
    torch.testing.assert_close(seen["hook_q"], _split(attn.q_proj(x)), atol=0, rtol=0)
    torch.testing.assert_close(seen["hook_k"], _split(attn.k_proj(x)), atol=0, rtol=0)
    torch.testing.assert_close(seen["hook_v"], _split(attn.v_proj(x)), atol=0, rtol=0)
    q = seen["hook_rot_q" if position == "rope" else "hook_q"].transpose(1, 2)  # [batch, head, seq, d_head]
    k = seen["hook_rot_k" if position == "rope" else "hook_k"].transpose(1, 2)
    v = seen["hook_v"].transpose(1, 2)
    # the additive bias, built by hand: ALiBi -slope*|i-j| (HeadWeights order), finfo.min on disallowed keys
    i = torch.arange(6)
    bias = torch.zeros(N_HEADS, 6, 6)
    if position == "alibi":
        bias = -attn.alibi_slopes[:, None, None] * (i[None, :] - i[:, None]).abs().float()
    allowed = mask[:, None, None, :] & (i[None, :] <= i[:, None] if causal else torch.ones(6, 6, dtype=torch.bool))
    expected = torch.where(allowed, q @ k.transpose(-2, -1) / math.sqrt(D_HEAD) + bias, torch.finfo(x.dtype).min)
    torch.testing.assert_close(seen["hook_attn_scores"], expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(seen["hook_attn_scores"].softmax(-1), out.pattern)
    torch.testing.assert_close(seen["hook_pattern"], out.pattern, atol=0, rtol=0)
    torch.testing.assert_close(seen["hook_z"], (out.pattern @ v).transpose(1, 2))


def test_rot_q_is_q_rotated_by_position_and_exists_only_under_rope():
    """TransformerLens: hook_q/hook_k before the rotation, hook_rot_q/hook_rot_k after, in rotary models only."""
    attn = _attention(d_head=D_HEAD, position="rope")
    seen, _ = _record(attn)
    torch.manual_seed(1)
    attn(torch.randn(2, 5, D_MODEL), padding_mask([5, 3], 5))
    for raw, rotated in (("hook_q", "hook_rot_q"), ("hook_k", "hook_rot_k")):
        q, rot = seen[raw], seen[rotated]
        assert torch.equal(rot[:, 0], q[:, 0])  # position 0 turns by angle 0
        assert not torch.allclose(rot[:, 1:], q[:, 1:])  # every later position turns
        torch.testing.assert_close(rot.norm(dim=-1), q.norm(dim=-1))  # a rotation keeps each vector's length
        # position 1, first feature pair (i, i + d/2) turns by exactly 1 radian (inv_freq[0] = 1)
        half = D_HEAD // 2
        a, b = q[:, 1, :, 0], q[:, 1, :, half]
        c, s = math.cos(1.0), math.sin(1.0)
        torch.testing.assert_close(rot[:, 1, :, 0], a * c - b * s)
        torch.testing.assert_close(rot[:, 1, :, half], b * c + a * s)
    for position in ("none", "alibi"):
        plain = _attention(position=position)
        assert plain.hook_rot_q is None and plain.hook_rot_k is None
        assert not any("rot" in name for name, _ in plain.named_modules())


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
        torch.testing.assert_close(seen[name], packed[:, :, index], atol=1e-6, rtol=0)
    real = mask[:, None, :].expand(-1, N_HEADS, -1)
    torch.testing.assert_close(seen["hook_pattern"][real], expected_weights[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(seen["hook_attn_scores"].softmax(-1)[real], expected_weights[real], atol=1e-5, rtol=0)
    z = seen["hook_z"].flatten(2)  # [batch, pos, head_index * d_head], TransformerLens' concatenation
    torch.testing.assert_close(ref.out_proj(z)[mask], expected[mask], atol=1e-5, rtol=0)


def test_fast_path_reaches_q_k_v_z_but_never_builds_scores_or_pattern():
    attn = _attention(position="rope")
    seen, _ = _record(attn)
    torch.manual_seed(2)
    out = attn(torch.randn(2, 5, D_MODEL), padding_mask([5, 3], 5))
    assert out.pattern is None
    assert sorted(seen) == ["hook_k", "hook_q", "hook_rot_k", "hook_rot_q", "hook_v", "hook_z"]


def test_a_hook_can_replace_the_scores():
    """Named points are read-write: forcing every query onto key 0 gives a one-hot pattern."""
    attn = _attention()
    def only_key_0(scores, hook):
        forced = torch.full_like(scores, -1e9)
        forced[..., 0] = 0.0
        return forced
    attn.hook_attn_scores.add_hook(only_key_0)
    pattern = attn(torch.randn(2, 4, D_MODEL), padding_mask([4, 4], 4), need_weights=True).pattern
    assert (pattern[..., 0] == 1).all() and (pattern[..., 1:] == 0).all()
    attn.hook_attn_scores.remove_hooks()
    pattern = attn(torch.randn(2, 4, D_MODEL), padding_mask([4, 4], 4), need_weights=True).pattern
    assert (pattern[..., 1:] > 0).all()


def test_names_are_module_paths_and_survive_copies_and_pruning():
    net = _net(pos_encoding="rope")
    assert net.blocks[0].attn.hook_z.name == "blocks.0.attn.hook_z"
    assert net.blocks[1].attn.hook_rot_k.name == "blocks.1.attn.hook_rot_k"
    assert net.blocks[1].attn.hook_z.layer() == 1
    assert sorted(net.hook_dict) == sorted(f"blocks.{i}.attn.{p}" for i in range(2)
                                           for p in PER_HEAD + MAPS + ROTATED)
    net.prune_heads({0: [1]})
    assert copy.deepcopy(net).blocks[0].attn.hook_z.name == "blocks.0.attn.hook_z"
    assert _attention().hook_z.name is None  # a layer on its own has no path


@pytest.mark.parametrize("position", ["sinusoidal", "rope", "alibi"])
def test_a_transformerlens_tutorial_hook_ablates_as_the_head_gate_does(position):
    """Written as a TransformerLens tutorial writes it: zero head 1 in place, read every pattern by a filter."""
    net = _net(pos_encoding=position)
    ids, mask = _batch()
    patterns: dict[str, torch.Tensor] = {}

    def head_ablation_hook(z, hook):
        z[:, :, 1, :] = 0.0
        return z

    def store_pattern(pattern, hook):
        patterns[hook.name] = pattern.detach().clone()

    with torch.no_grad():
        hooked = net.run_with_hooks(ids, mask, return_patterns=True, fwd_hooks=[
            ("blocks.0.attn.hook_z", head_ablation_hook),
            (lambda name: name.endswith("hook_pattern"), store_pattern)])
        intact = net(ids, mask)
        net.set_head_gate(0, 1, 0.0)
        gated = net(ids, mask, return_patterns=True)
    assert not torch.allclose(hooked.logits, intact.logits)  # the ablation does something
    torch.testing.assert_close(hooked.logits, gated.logits, atol=0, rtol=0)
    assert sorted(patterns) == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]
    for layer in range(2):
        torch.testing.assert_close(patterns[f"blocks.{layer}.attn.hook_pattern"], gated.patterns[layer], atol=0, rtol=0)
    assert not any(point._forward_hooks for point in net.hook_dict.values())  # run_with_hooks removed them


def test_hooks_leave_other_hooks_in_place_and_go_even_when_the_forward_fails():
    net = _net()
    ids, mask = _batch()
    plain = net.blocks[0].attn.hook_z.register_forward_hook(lambda module, args, out: None)
    kept = net.blocks[1].attn.hook_z.add_hook(lambda z, hook: None)

    def fail(z, hook):
        raise RuntimeError("a broken hook")

    with pytest.raises(RuntimeError, match="a broken hook"):
        net.run_with_hooks(ids, mask, fwd_hooks=[(lambda name: name.endswith("hook_z"), fail)])
    assert list(net.blocks[0].attn.hook_z._forward_hooks) == [plain.id]
    assert list(net.blocks[1].attn.hook_z._forward_hooks) == [kept.id]
    with net.hooks([("blocks.0.attn.hook_v", lambda v, hook: v * 0.0)]):
        assert len(net.blocks[0].attn.hook_v._forward_hooks) == 1
    assert not net.blocks[0].attn.hook_v._forward_hooks


def test_a_hook_returning_none_changes_nothing_and_bad_names_are_refused():
    net = _net()
    ids, mask = _batch()
    with torch.no_grad():
        expected = net(ids, mask).logits
        seen = []
        got = net.run_with_hooks(ids, mask, fwd_hooks=[("blocks.1.attn.hook_q", lambda q, hook: seen.append(hook.name))])
    assert torch.equal(got.logits, expected) and seen == ["blocks.1.attn.hook_q"]
    with pytest.raises(HeadlabError, match="no hook point 'blocks.0.attn.hook_scores'"):
        net.run_with_hooks(ids, mask, fwd_hooks=[("blocks.0.attn.hook_scores", lambda t, hook: None)])
    with pytest.raises(HeadlabError, match="a hook point name or a filter"):
        with hooks(net, [(3, lambda t, hook: None)]):
            pass


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
