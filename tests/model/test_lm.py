"""HeadlabLM: causal (no look-ahead), attn-only / LayerNorm-off / tied variants, the weight path's patterns."""

from __future__ import annotations

import pytest
import torch

from headlab.errors import ConfigError
from headlab.model.hooks import capture_patterns
from headlab.model.lm import HeadlabLM, LMConfig


@pytest.mark.parametrize("options", [{}, {"attn_only": False}, {"layer_norm": False}, {"tied_unembed": True},
                                     {"pos_encoding": "rope"}])
def test_logits_do_not_depend_on_later_tokens(options):
    torch.manual_seed(0)
    net = HeadlabLM(LMConfig(vocab_size=12, max_len=16, d_model=16, **options)).eval()
    tokens = torch.randint(0, 12, (2, 10))
    changed = tokens.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 12
    a, b = net(tokens).logits, net(changed).logits
    assert a.shape == (2, 10, 12)
    torch.testing.assert_close(a[:, :6], b[:, :6])
    assert not torch.allclose(a[:, 6:], b[:, 6:])


def test_attn_only_has_no_mlp_and_layer_norm_off_has_none():
    net = HeadlabLM(LMConfig(vocab_size=12, max_len=16, d_model=16, layer_norm=False))
    assert all(block.mlp is None for block in net.blocks)
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in net.modules())
    tied = HeadlabLM(LMConfig(vocab_size=12, max_len=16, d_model=16, tied_unembed=True))
    assert tied.unembed is None and tied.W_U.shape == (16, 12)
    torch.testing.assert_close(tied.W_U, tied.W_E.T / 4.0)


def test_patterns_are_causal_rows_and_match_the_fast_path():
    torch.manual_seed(0)
    net = HeadlabLM(LMConfig(vocab_size=12, max_len=16, d_model=16, n_layers=2)).eval()
    tokens = torch.randint(0, 12, (3, 9))
    mask = torch.ones_like(tokens, dtype=torch.bool)
    patterns = capture_patterns(net, tokens, mask)
    assert len(patterns) == 2 and patterns[0].shape == (3, 4, 9, 9)
    assert torch.equal(patterns[1].triu(1), torch.zeros_like(patterns[1]))
    torch.testing.assert_close(net(tokens, return_patterns=True).logits, net(tokens).logits, atol=1e-5, rtol=1e-5)


def test_bad_config_is_one_error():
    with pytest.raises(ConfigError, match="model.n_heads"):
        LMConfig(vocab_size=12, max_len=16, d_model=16, n_heads=3)
    with pytest.raises(ConfigError, match="model.attn_only"):
        LMConfig(vocab_size=12, max_len=16, attn_only="yes")
