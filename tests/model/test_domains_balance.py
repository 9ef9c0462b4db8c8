"""model.domain_router_balance: KL(mean router load || uniform) as its own loss term."""

from __future__ import annotations

import math

import pytest
import torch

from headlab.errors import ConfigError
from headlab.lit import HeadClassifierModule
from headlab.model import ModelConfig
from headlab.model.domains import router_balance

SMALL = dict(vocab_size=20, n_classes=2, max_len=16, n_layers=2, n_heads=2, d_model=16, dropout=0.0,
             domain_split_layers=2, n_domains=3, domain_router="soft")


def test_the_term_is_zero_for_an_even_load_and_ln_n_for_a_collapsed_one():
    uniform = torch.full((5, 3), 1 / 3)
    assert router_balance([uniform]).item() == pytest.approx(0.0, abs=1e-7)
    rows_even = torch.eye(3).repeat(2, 1)               # each row on one pipeline, but 2 rows per pipeline
    assert router_balance([rows_even]).item() == pytest.approx(0.0, abs=1e-7)
    collapsed = torch.zeros(6, 3)
    collapsed[:, 1] = 1.0                               # the whole batch on pipeline 1
    assert router_balance([collapsed]).item() == pytest.approx(math.log(3))
    skewed = torch.tensor([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]])  # load (1/2, 1/2, 0): KL = ln(3/2)
    assert router_balance([skewed]).item() == pytest.approx(math.log(1.5))
    assert router_balance([uniform, collapsed]).item() == pytest.approx(math.log(3) / 2)  # mean over layers


def _module(weight: float) -> HeadClassifierModule:
    torch.manual_seed(0)
    module = HeadClassifierModule(ModelConfig(**SMALL, domain_router_balance=weight))
    return module.train()


def _batch() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 20, (6, 9), generator=gen)
    return {"input_ids": ids, "attention_mask": torch.ones(6, 9, dtype=torch.bool),
            "labels": torch.tensor([0, 1, 0, 1, 1, 0])}


def test_the_weighted_term_joins_the_training_loss_and_trains_the_router():
    plain, balanced = _module(0.0), _module(0.5)
    balanced.load_state_dict(plain.state_dict())
    routers = []
    for block in balanced.net.blocks:                   # an independent record of the routers' outputs
        block.attn.domain_router.register_forward_hook(lambda m, a, out: routers.append(out.detach()))
    loss_plain = plain.training_step(_batch(), 0)
    loss_balanced = balanced.training_step(_batch(), 0)
    expected = router_balance([z.softmax(-1) for z in routers])
    assert len(routers) == 2 and expected.item() > 0
    assert (loss_balanced - loss_plain).item() == pytest.approx(0.5 * expected.item(), rel=1e-5)
    loss_plain.backward()
    loss_balanced.backward()
    router_grads = [(b.attn.domain_router.weight.grad, p.attn.domain_router.weight.grad)
                    for b, p in zip(balanced.net.blocks, plain.net.blocks)]
    assert all(not torch.allclose(g_b, g_p) for g_b, g_p in router_grads)
    assert not balanced._router_logits                  # nothing kept past the step


def test_weight_zero_registers_nothing():
    module = _module(0.0)
    assert all(not block.attn.domain_router._forward_hooks for block in module.net.blocks)


@pytest.mark.parametrize("kwargs, allowed", [
    ({"domain_router_balance": -0.1}, "a number >= 0"),
    ({"domain_router_balance": 0.1, "domain_router": "none"}, "0 unless model.domain_router=soft"),
])
def test_bad_balance_settings_are_one_line_config_errors(kwargs, allowed):
    with pytest.raises(ConfigError, match="model.domain_router_balance") as info:
        ModelConfig(**{**SMALL, **kwargs})
    assert allowed in str(info.value) and "\n" not in str(info.value)
