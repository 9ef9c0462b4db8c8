"""PipelineView: the network forced through one domain's Q/K/V, the view the per-domain roles measure."""

from __future__ import annotations

import torch

from headlab.model.domains import PipelineView
from tests.model.test_domains import _batch, _net, _shared_copy_of_domain


def _patterns(net, ids, mask):
    return net(ids, mask, return_patterns=True).patterns


def test_the_view_of_domain_d_is_the_shared_model_with_domain_ds_qkv():
    split = _net(seed=3, domain_split_layers=1, n_domains=3)
    ids, mask = _batch()
    for domain in range(3):
        view = _patterns(PipelineView(split, domain), ids, mask)
        reference = _patterns(_shared_copy_of_domain(split, domain), ids, mask)
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(view, reference))
    one, two = (_patterns(PipelineView(split, d), ids, mask)[0] for d in (1, 2))
    assert not torch.allclose(one, two)                 # different pipelines, different patterns


def test_with_a_router_the_view_is_the_routerless_model_given_domain_d():
    routed = _net(seed=4, domain_split_layers=2, n_domains=2, domain_router="soft")
    by_id = _net(seed=4, domain_split_layers=2, n_domains=2)
    by_id.load_state_dict({k: v for k, v in routed.state_dict().items() if "domain_router" not in k})
    ids, mask = _batch()
    for domain in range(2):
        view = PipelineView(routed, domain)(ids, mask).logits
        reference = by_id(ids, mask, domain_ids=torch.full((ids.size(0),), domain)).logits
        assert torch.allclose(view, reference, atol=1e-6)
    assert not any(block.attn.domain_router._forward_hooks for block in routed.blocks)  # nothing left behind
