"""init_weights: Xavier bounds per head, init_scale scales Q/K/V only."""

from __future__ import annotations

import math

import pytest
import torch

from headlab.errors import ConfigError
from headlab.model import HeadlabClassifier, ModelConfig
from headlab.model.init import EMBEDDING_STD, init_weights

D_MODEL, N_HEADS, D_HEAD = 128, 4, 16  # d_head != d_model / n_heads: per-head fans differ from whole-matrix fans


def _model(init_scale: float, seed: int = 0) -> HeadlabClassifier:
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=30, n_classes=2, max_len=8, n_layers=1, n_heads=N_HEADS, d_model=D_MODEL,
                      d_head=D_HEAD, init_scale=init_scale, pos_encoding="learned")
    return HeadlabClassifier(cfg)


@pytest.mark.parametrize("init_scale", [0.5, 2.0])
def test_qkv_follow_per_head_xavier_bound(init_scale):
    attn = _model(init_scale).blocks[0].attn
    bound = init_scale * math.sqrt(6.0 / (D_MODEL + D_HEAD))  # fan_in = d_model, fan_out = d_head
    for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
        w = proj.weight
        assert w.abs().max() <= bound
        assert w.abs().max() > 0.99 * bound  # 8k draws per matrix reach the edge of the interval
        assert w.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.03)  # std of U(-a, a)
        assert (proj.bias == 0).all()


def test_init_scale_scales_qkv_std_proportionally_and_nothing_else():
    small, large = _model(0.5), _model(2.0)
    for name in ("q_proj", "k_proj", "v_proj"):
        ratio = getattr(large.blocks[0].attn, name).weight.std() / getattr(small.blocks[0].attn, name).weight.std()
        assert ratio.item() == pytest.approx(4.0, rel=0.05)
    out_bound = math.sqrt(6.0 / (D_MODEL + N_HEADS * D_HEAD))
    for model in (small, large):
        assert model.blocks[0].attn.out_proj.weight.abs().max() <= out_bound
    for name in ("blocks.0.attn.out_proj.weight", "blocks.0.mlp.fc.weight", "classifier.weight"):  # same seed
        assert torch.equal(small.get_parameter(name), large.get_parameter(name)), name


def test_embeddings_and_layernorm():
    model = _model(1.0)
    emb = model.tok_emb.weight
    assert (emb[0] == 0).all()  # pad row
    assert emb[1:].std().item() == pytest.approx(EMBEDDING_STD, rel=0.1)
    assert model.pos_enc.embedding.weight.std().item() == pytest.approx(EMBEDDING_STD, rel=0.15)
    assert (model.ln_f.weight == 1).all() and (model.blocks[0].ln_1.bias == 0).all()


def test_init_is_deterministic_under_seed():
    a, b = _model(1.0, seed=3), _model(1.0, seed=3)
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(pa, pb), name


def test_init_rejects_non_positive_scale():
    with pytest.raises(ConfigError, match="model.init_scale"):
        init_weights(_model(1.0), 0.0)
