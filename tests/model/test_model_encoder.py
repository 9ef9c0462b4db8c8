"""HeadlabClassifier: position encodings, padding, pooling, gates, pruning, parameter counts."""

from __future__ import annotations

import pytest
import torch

from headlab.errors import ConfigError
from headlab.model import POS_ENCODINGS, HeadlabClassifier, ModelConfig, count_parameters


def _model(seed: int = 0, **overrides) -> HeadlabClassifier:
    torch.manual_seed(seed)
    cfg = dict(vocab_size=12, n_classes=3, max_len=10, n_layers=2, n_heads=4, d_model=16, dropout=0.0)
    return HeadlabClassifier(ModelConfig(**{**cfg, **overrides})).eval()


def _batch(lengths: list[int], seq: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """input_ids [batch, seq] ([CLS]=1 first, ids >= 3 after, [PAD]=0) and mask [batch, seq]."""
    gen = torch.Generator().manual_seed(seed)
    mask = torch.arange(seq)[None, :] < torch.tensor(lengths)[:, None]
    ids = torch.randint(3, 12, (len(lengths), seq), generator=gen)
    ids[:, 0] = 1
    return ids.masked_fill(~mask, 0), mask


@pytest.mark.parametrize("pos_encoding", POS_ENCODINGS)
def test_every_position_encoding_trains(pos_encoding):
    model = _model(pos_encoding=pos_encoding).train()
    ids, mask = _batch([7, 4], 7)
    out = model(ids, mask)
    assert out.logits.shape == (2, 3) and out.patterns is None
    torch.nn.functional.cross_entropy(out.logits, torch.tensor([0, 2])).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert model.blocks[0].attn.q_proj.weight.grad.abs().sum() > 0
    if pos_encoding == "learned":
        assert model.pos_enc.embedding.weight.grad[:7].abs().sum() > 0


@pytest.mark.parametrize("pos_encoding", POS_ENCODINGS)
def test_only_position_encodings_make_the_model_order_sensitive(pos_encoding):
    model = _model(pos_encoding=pos_encoding)
    ids, mask = _batch([8], 8)
    permuted = ids.clone()
    permuted[0, 1:] = ids[0, 1:].flip(0)  # [CLS] stays first
    same = torch.allclose(model(ids, mask).logits, model(permuted, mask).logits, atol=1e-5)
    assert same == (pos_encoding == "none")  # without position information the [CLS] view is a bag of tokens


@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("pos_encoding", ["sinusoidal", "alibi", "rope"])
@pytest.mark.parametrize("causal", [False, True])
def test_padding_is_invisible(pooling, pos_encoding, causal):
    model = _model(pooling=pooling, pos_encoding=pos_encoding, causal=causal)
    ids, mask = _batch([6, 3], 6)
    out = model(ids, mask, return_patterns=True)
    for pattern in out.patterns:
        assert (pattern[1, :, :, 3:] == 0).all()
    garbage = ids.clone()
    garbage[1, 3:] = torch.tensor([5, 7, 9])
    torch.testing.assert_close(model(garbage, mask).logits, out.logits, atol=1e-6, rtol=0)
    trimmed = model(ids[1:, :3], mask[1:, :3]).logits  # the same sequence without padding at all
    torch.testing.assert_close(trimmed, out.logits[1:], atol=1e-5, rtol=0)


def test_mean_pooling_averages_real_tokens_only():
    model = _model(pooling="mean")
    ids, mask = _batch([5, 2], 5)
    hidden = {}
    model.ln_f.register_forward_hook(lambda mod, inp, out: hidden.setdefault("x", out))
    logits = model(ids, mask).logits
    expected_pooled = torch.stack([hidden["x"][0, :5].mean(0), hidden["x"][1, :2].mean(0)])
    torch.testing.assert_close(logits, model.classifier(expected_pooled))


def test_weight_path_gives_same_logits_and_named_pattern_hook():
    model = _model(pos_encoding="alibi")
    ids, mask = _batch([6, 4], 6)
    captured = []
    model.blocks[1].attn.hook_pattern.register_forward_hook(lambda mod, inp, out: captured.append(out))
    out = model(ids, mask, return_patterns=True)
    torch.testing.assert_close(out.logits, model(ids, mask).logits, atol=1e-5, rtol=0)
    assert [p.shape for p in out.patterns] == [(2, 4, 6, 6)] * 2
    assert len(captured) == 1 and torch.equal(captured[0], out.patterns[1])


def test_head_gates_argument_buffer_and_setters_agree():
    model = _model()
    ids, mask = _batch([6, 5], 6)
    gates = torch.ones(2, 4)
    gates[1, 2] = 0.0
    explicit = model(ids, mask, head_gates=gates).logits
    assert not torch.allclose(explicit, model(ids, mask).logits)
    model.set_head_gate(1, 2, 0.0)
    torch.testing.assert_close(model(ids, mask).logits, explicit)
    model.reset_head_gates()
    assert torch.equal(model.head_gates, torch.ones(2, 4))
    with pytest.raises(ValueError, match=r"shape \(2, 4\)"):
        model(ids, mask, head_gates=torch.ones(4))


def test_model_gate_gradient_matches_finite_difference():
    model = _model().double()
    ids, mask = _batch([6, 4], 6)
    gates = torch.ones(2, 4, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(model(ids, mask, head_gates=gates).logits[:, 0].sum(), gates)
    step = torch.zeros(2, 4, dtype=torch.float64)
    step[1, 3] = 1e-6
    numeric = (model(ids, mask, head_gates=gates.detach() + step).logits[:, 0].sum()
               - model(ids, mask, head_gates=gates.detach() - step).logits[:, 0].sum()) / 2e-6
    assert grad[1, 3].item() == pytest.approx(numeric.item(), rel=1e-5)


@pytest.mark.parametrize("pos_encoding", ["learned", "alibi"])
def test_prune_heads_equals_gating_with_fewer_parameters(pos_encoding):
    model = _model(pos_encoding=pos_encoding)
    ids, mask = _batch([6, 4], 6)
    model.set_head_gate(0, 3, 0.5)  # a surviving head's gate value must survive pruning
    gates = model.head_gates.clone()
    gates[0, 1] = gates[1, 0] = gates[1, 2] = 0.0
    expected = model(ids, mask, head_gates=gates).logits
    n_before = count_parameters(model)
    model.prune_heads({0: [1], 1: [0, 2]})
    assert model.heads_per_layer == [3, 2]
    per_head = 3 * (16 * 4 + 4) + 4 * 16  # q, k, v rows with biases + out_proj columns
    assert n_before - count_parameters(model) == 3 * per_head
    assert torch.equal(model.head_gates, torch.tensor([[1.0, 1.0, 0.5], [1.0, 1.0, 0.0]]))  # ragged: 0-padded
    torch.testing.assert_close(model(ids, mask).logits, expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(model(ids, mask, return_patterns=True).logits, expected, atol=1e-5, rtol=0)


def test_uniform_pruning_keeps_a_dense_gate_matrix_and_rejects_bad_requests():
    model = _model()
    with pytest.raises(ValueError, match="layers to prune"):
        model.prune_heads({2: [0]})
    with pytest.raises(ValueError, match="in \\[0, 4\\)"):
        model.prune_heads({0: [1], 1: [7]})
    assert model.heads_per_layer == [4, 4]  # nothing half-done
    model.prune_heads({0: [torch.tensor(0)], 1: [3]})  # tensor indices, as an importance ranking gives
    assert tuple(model.head_gates.shape) == (2, 3) and (model.head_gates == 1).all()


def test_count_parameters_by_hand():
    model = _model(n_layers=1, n_heads=2, d_model=8, d_ff=16, max_len=6, pos_encoding="learned")
    attn = 3 * (8 * 8 + 8) + (8 * 8 + 8)
    block = attn + 2 * 16 + (8 * 16 + 16) + (16 * 8 + 8)
    non_embedding = block + 16 + (8 * 3 + 3)
    assert count_parameters(model) == non_embedding
    assert count_parameters(model, non_embedding=False) == non_embedding + 12 * 8 + 6 * 8


def test_rejects_sequences_longer_than_max_len():
    model = _model()
    ids, mask = _batch([11], 11)
    with pytest.raises(ConfigError, match="model.max_len"):
        model(ids, mask)
