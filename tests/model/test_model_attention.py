"""MultiHeadSelfAttention against torch's reference, its own two paths, gates and pruning."""

from __future__ import annotations

import pytest
import torch

from headlab.model import MultiHeadSelfAttention
from tests.model._reference import padding_mask, seeded_attention, torch_attention_like

D_MODEL, N_HEADS = 16, 4


def _attention(**kwargs) -> MultiHeadSelfAttention:
    return seeded_attention(D_MODEL, N_HEADS, **kwargs)


def test_matches_torch_multihead_attention():
    attn = _attention()
    ref = torch_attention_like(attn)
    torch.manual_seed(1)
    x, mask = torch.randn(3, 7, D_MODEL), padding_mask([7, 4, 2], 7)
    expected, expected_weights = ref(x, x, x, key_padding_mask=~mask, need_weights=True, average_attn_weights=False)
    for need_weights in (False, True):
        out = attn(x, mask, need_weights=need_weights)
        torch.testing.assert_close(out.output[mask], expected[mask], atol=1e-5, rtol=0)
    pattern = attn(x, mask, need_weights=True).pattern  # [batch, head, q, k]
    real_rows = mask[:, None, :].expand(-1, N_HEADS, -1)
    torch.testing.assert_close(pattern[real_rows], expected_weights[real_rows], atol=1e-5, rtol=0)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("position", ["none", "rope", "alibi"])
@pytest.mark.parametrize("gated", [False, True])
def test_fast_path_equals_weight_path(causal, position, gated):
    attn = _attention(causal=causal, position=position)
    torch.manual_seed(2)
    x, mask = torch.randn(3, 6, D_MODEL), padding_mask([6, 3, 1], 6)
    gate = torch.tensor([1.0, 0.0, 0.5, 2.0]) if gated else None
    fast = attn(x, mask, head_gate=gate)
    slow = attn(x, mask, need_weights=True, head_gate=gate)
    assert fast.pattern is None
    torch.testing.assert_close(fast.output, slow.output, atol=1e-5, rtol=0)  # padded query rows too
    assert not torch.isnan(slow.output).any()
    torch.testing.assert_close(slow.pattern.sum(-1), torch.ones(3, N_HEADS, 6))
    if causal:
        assert (slow.pattern.triu(diagonal=1) == 0).all()


@pytest.mark.parametrize("position", ["none", "rope", "alibi"])
def test_padded_keys_get_no_attention_and_do_not_leak(position):
    attn = _attention(position=position)
    torch.manual_seed(3)
    x, mask = torch.randn(2, 6, D_MODEL), padding_mask([6, 3], 6)
    out = attn(x, mask, need_weights=True)
    assert (out.pattern[1, :, :, 3:] == 0).all()
    changed = x.clone()
    changed[1, 3:] = torch.randn(3, D_MODEL) * 10
    out_changed = attn(changed, mask)
    torch.testing.assert_close(out_changed.output[mask], out.output[mask], atol=1e-6, rtol=0)


def test_all_padding_sequence_gives_no_nan():
    attn = _attention()
    x, mask = torch.randn(2, 4, D_MODEL), padding_mask([4, 0], 4)
    for need_weights in (False, True):
        assert torch.isfinite(attn(x, mask, need_weights=need_weights).output).all()


def test_gate_zero_removes_exactly_that_heads_contribution():
    attn = _attention()
    torch.manual_seed(4)
    x, mask = torch.randn(2, 5, D_MODEL), padding_mask([5, 3], 5)
    head, d_head = 2, D_MODEL // N_HEADS
    gated = attn(x, mask, head_gate=torch.tensor([1.0, 1.0, 0.0, 1.0])).output
    with torch.no_grad():
        attn.out_proj.weight[:, head * d_head:(head + 1) * d_head] = 0.0
    ablated = attn(x, mask).output
    torch.testing.assert_close(gated, ablated, atol=1e-6, rtol=0)


def test_gate_gradient_matches_finite_difference():
    attn = _attention().double()
    torch.manual_seed(5)
    x, mask = torch.randn(2, 5, D_MODEL, dtype=torch.float64), padding_mask([5, 4], 5)
    target = torch.randn(2, 5, D_MODEL, dtype=torch.float64)

    def loss(gate: torch.Tensor) -> torch.Tensor:
        return ((attn(x, mask, head_gate=gate).output - target) ** 2).sum()

    gate = torch.tensor([1.0, 0.7, 0.3, 1.2], dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(loss(gate), gate)
    eps = 1e-6
    for h in range(N_HEADS):
        step = torch.zeros(N_HEADS, dtype=torch.float64)
        step[h] = eps
        numeric = (loss(gate.detach() + step) - loss(gate.detach() - step)) / (2 * eps)
        assert grad[h].item() == pytest.approx(numeric.item(), rel=1e-6, abs=1e-8)
    assert grad.abs().min() > 0


def test_head_weights_reproduce_the_projections():
    attn = _attention(d_head=6)  # attention width 24 != d_model 16: layout errors would show
    torch.manual_seed(6)
    x = torch.randn(2, 5, D_MODEL)
    w = attn.head_weights()
    assert w.W_Q.shape == (N_HEADS, D_MODEL, 6) and w.W_O.shape == (N_HEADS, 6, D_MODEL)
    q = attn.q_proj(x).unflatten(-1, (N_HEADS, 6))  # [batch, seq, head, d_head]
    per_head_q = torch.einsum("bsm,hmd->bshd", x, w.W_Q) + w.b_Q
    torch.testing.assert_close(per_head_q, q)
    z = torch.randn(2, 5, N_HEADS, 6)  # [batch, seq, head, d_head]
    per_head_out = torch.einsum("bshd,hdm->bsm", z, w.W_O) + w.b_O
    torch.testing.assert_close(per_head_out, attn.out_proj(z.flatten(2)))
    assert w.W_K.data_ptr() == attn.k_proj.weight.data_ptr()  # views, not copies


@pytest.mark.parametrize("position", ["none", "alibi", "rope"])
def test_prune_heads_equals_gating_them_off(position):
    attn = _attention(position=position)
    torch.manual_seed(7)
    x, mask = torch.randn(2, 6, D_MODEL), padding_mask([6, 4], 6)
    gated = attn(x, mask, head_gate=torch.tensor([1.0, 0.0, 1.0, 0.0])).output
    n_before = sum(p.numel() for p in attn.parameters())
    slopes_before = None if attn.alibi_slopes is None else attn.alibi_slopes.clone()
    assert attn.prune_heads([1, 3]) == [0, 2]
    assert attn.n_heads == 2 and attn.q_proj.weight.shape == (8, D_MODEL) and attn.out_proj.weight.shape == (D_MODEL, 8)
    d_head = D_MODEL // N_HEADS
    per_head = 3 * (D_MODEL * d_head + d_head) + d_head * D_MODEL  # q, k, v rows with biases + out_proj columns
    assert n_before - sum(p.numel() for p in attn.parameters()) == 2 * per_head
    if slopes_before is not None:
        torch.testing.assert_close(attn.alibi_slopes, slopes_before[[0, 2]])
    for need_weights in (False, True):
        torch.testing.assert_close(attn(x, mask, need_weights=need_weights).output, gated, atol=1e-6, rtol=0)


def test_prune_rejects_bad_heads():
    attn = _attention()
    with pytest.raises(ValueError, match="in \\[0, 4\\)"):
        attn.prune_heads([4])
    with pytest.raises(ValueError, match="all 4 heads"):
        attn.prune_heads(range(4))
    assert attn.n_heads == N_HEADS


def test_attention_dropout_only_in_training():
    attn = _attention(attn_dropout=0.5)
    x, mask = torch.randn(2, 5, D_MODEL), padding_mask([5, 5], 5)
    torch.testing.assert_close(attn(x, mask).output, attn(x, mask, need_weights=True).output, atol=1e-5, rtol=0)
    attn.train()
    torch.manual_seed(8)
    first = attn(x, mask, need_weights=True).output
    assert not torch.allclose(first, attn(x, mask, need_weights=True).output)
