"""ModelConfig validation and the geometry it resolves to."""

from __future__ import annotations

import pytest

from headlab.errors import ConfigError
from headlab.model import HeadlabClassifier, ModelConfig

BASE = dict(vocab_size=20, n_classes=2, max_len=16)


@pytest.mark.parametrize(
    "key, value",
    [
        ("vocab_size", 3), ("vocab_size", 10.0), ("n_classes", 1), ("max_len", 1), ("n_layers", 0),
        ("n_heads", 0), ("n_heads", True), ("d_model", -8), ("d_head", 0), ("d_ff", 0), ("dropout", 1.0),
        ("dropout", -0.1), ("attn_dropout", 1.5), ("pos_encoding", "relative"), ("pooling", "max"),
        ("init_scale", 0.0), ("init_scale", -1.0), ("causal", "yes"), ("pad_id", 20), ("pad_id", -1),
    ],
)
def test_invalid_value_names_key_and_value(key, value):
    with pytest.raises(ConfigError) as info:
        ModelConfig(**{**BASE, key: value})
    assert info.value.key == f"model.{key}"
    assert f"model.{key}" in str(info.value) and repr(value) in str(info.value)


def test_indivisible_heads_explain_both_ways_out():
    with pytest.raises(ConfigError) as info:
        ModelConfig(**BASE, d_model=128, n_heads=3)
    message = str(info.value)
    assert "model.n_heads=3" in message and "d_model=128" in message and "d_head" in message
    assert ModelConfig(**BASE, d_model=128, n_heads=3, d_head=40).d_attn == 120  # the way out works


@pytest.mark.parametrize("geometry", [dict(d_model=32, n_heads=6, d_head=5), dict(d_model=30, n_heads=6)])
def test_rope_needs_even_head_dim(geometry):
    with pytest.raises(ConfigError, match="even head dimension"):
        ModelConfig(**BASE, pos_encoding="rope", **geometry)
    assert ModelConfig(**BASE, pos_encoding="alibi", **geometry).head_dim == 5


def test_defaults_resolve():
    cfg = ModelConfig(**BASE)
    assert (cfg.head_dim, cfg.d_attn, cfg.ff_dim) == (32, 128, 512)
    assert ModelConfig(**BASE, dropout=0).dropout == 0  # YAML writes 0, not 0.0


def test_budget_vs_fixed_head_geometry_sets_parameter_shapes():
    budget = HeadlabClassifier(ModelConfig(**BASE, d_model=32, n_heads=8, d_ff=48))
    fixed = HeadlabClassifier(ModelConfig(**BASE, d_model=32, n_heads=8, d_head=16, d_ff=48))
    attn_budget, attn_fixed = budget.blocks[0].attn, fixed.blocks[0].attn
    assert attn_budget.q_proj.weight.shape == (32, 32) and attn_budget.out_proj.weight.shape == (32, 32)
    assert attn_fixed.q_proj.weight.shape == (128, 32) and attn_fixed.out_proj.weight.shape == (32, 128)
    assert attn_budget.head_weights().W_V.shape == (8, 32, 4)
    assert attn_fixed.head_weights().W_O.shape == (8, 16, 32)
    assert budget.blocks[1].mlp.fc.weight.shape == (48, 32)
    assert tuple(budget.head_gates.shape) == (2, 8)
