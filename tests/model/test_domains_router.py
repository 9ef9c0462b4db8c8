"""model.domain_router=soft: a learned mix of the per-domain pipelines replaces the domain id."""

from __future__ import annotations

import pytest
import torch

from headlab.errors import ConfigError
from headlab.model import HeadlabClassifier, ModelConfig

SMALL = dict(vocab_size=20, n_classes=2, max_len=16, n_layers=2, n_heads=2, d_model=16, dropout=0.0,
             domain_split_layers=1, n_domains=3)


def _net(**kwargs) -> HeadlabClassifier:
    torch.manual_seed(0)
    return HeadlabClassifier(ModelConfig(**{**SMALL, **kwargs})).eval()


def _batch():
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 20, (4, 9), generator=gen)
    mask = torch.ones(4, 9, dtype=torch.bool)
    mask[2, 5:] = False
    return ids, mask


def test_gradients_reach_every_pipeline_and_the_router():
    net = _net(domain_router="soft").train()
    ids, mask = _batch()
    net(ids, mask, domain_ids=torch.zeros(4, dtype=torch.long)).logits.sum().backward()
    attn = net.blocks[0].attn
    for projs in attn.domain_projections():
        for proj in projs:
            assert proj.weight.grad is not None and proj.weight.grad.abs().sum() > 0
    assert attn.domain_router.weight.grad.abs().sum() > 0


def test_the_router_reads_no_domain_id():
    net = _net(domain_router="soft")
    ids, mask = _batch()
    logits = net(ids, mask).logits
    for domains in ([0, 1, 2, 0], [-1, -1, 5, 2]):  # unknown ids too: the router never looks at them
        assert torch.equal(net(ids, mask, domain_ids=torch.tensor(domains)).logits, logits)


def test_a_router_sure_of_one_domain_equals_hard_routing_to_it():
    routed, hard = _net(domain_router="soft"), _net()
    hard.load_state_dict({k: v for k, v in routed.state_dict().items() if "domain_router" not in k})
    ids, mask = _batch()
    with torch.no_grad():
        routed.blocks[0].attn.domain_router.weight.zero_()
        routed.blocks[0].attn.domain_router.bias.copy_(torch.tensor([0.0, 200.0, 0.0]))
    torch.testing.assert_close(routed(ids, mask).logits, hard(ids, mask, domain_ids=torch.ones(4, dtype=torch.long)).logits,
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kwargs", [dict(domain_router="hard"), dict(domain_router="soft", domain_split_layers=0)])
def test_bad_router_configs_name_the_key(kwargs):
    with pytest.raises(ConfigError, match="model.domain_router"):
        ModelConfig(**{**SMALL, **kwargs})
