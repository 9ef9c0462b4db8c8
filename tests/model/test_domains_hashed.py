"""model.domain_router=hashed: per-domain Q/K/V routed by a hash of the tokens, a parameter-matched control."""

from __future__ import annotations

import pytest
import torch

from headlab.data.collate import pad_right
from headlab.data.multidomain import generate_multidomain
from headlab.data.tokenizer import CharTokenizer
from headlab.errors import ConfigError
from headlab.model import HeadlabClassifier, ModelConfig
from headlab.model.domains import PipelineView, hashed_routes

SMALL = dict(vocab_size=40, n_classes=2, max_len=48, n_layers=2, n_heads=2, d_model=16, dropout=0.0,
             domain_split_layers=2, n_domains=2)


def _net(**kwargs) -> HeadlabClassifier:
    torch.manual_seed(0)
    return HeadlabClassifier(ModelConfig(**{**SMALL, **kwargs})).eval()


def _multidomain_batch(n: int = 1500, max_len: int = 48):
    data = generate_multidomain(n=n, seed=3)
    tokenizer = CharTokenizer.fit(data.texts)
    ids, mask = pad_right([tokenizer.encode(text, max_len) for text in data.texts])
    domains = torch.tensor([0 if d == "previous" else 1 for d in data.domains])
    return ids, mask, domains


def test_routes_are_independent_of_the_domain():
    ids, mask, domains = _multidomain_batch()
    for n in (2, 3):
        routes = hashed_routes(ids, mask, n)
        for domain in (0, 1):
            share = torch.bincount(routes[domains == domain], minlength=n).float() / (domains == domain).sum()
            # 1,500 rows a domain: a fair split has SD 0.013 per share, so 0.05 is about 4 SD
            assert torch.all((share - 1 / n).abs() < 0.05), (n, domain, share)


def test_a_rows_route_ignores_padding_and_its_neighbours():
    ids, mask, _ = _multidomain_batch(n=20)
    routes = hashed_routes(ids, mask, 2)
    wider = torch.cat([ids, torch.zeros(ids.size(0), 30, dtype=torch.long)], dim=1)
    assert torch.equal(hashed_routes(wider, wider != 0, 2), routes)
    assert torch.equal(hashed_routes(ids.flip(0), mask.flip(0), 2), routes.flip(0))
    changed = ids.clone()
    changed[:, 5] = changed[:, 5] % 30 + 1  # one token of every row: the routes move for about half the rows
    assert 0.2 < (hashed_routes(changed, changed != 0, 2) != routes).float().mean() < 0.8


def test_same_parameters_as_the_split_model_routed_by_domain():
    hashed, by_domain = _net(domain_router="hashed"), _net()
    assert {k: v.shape for k, v in hashed.state_dict().items()} == {k: v.shape for k, v in by_domain.state_dict().items()}


def test_each_row_goes_through_its_hashed_pipeline_whatever_its_domain_id():
    hashed, by_domain = _net(domain_router="hashed"), _net()
    by_domain.load_state_dict(hashed.state_dict())
    ids, mask, _ = _multidomain_batch(n=8)
    ids = ids.clamp(max=39)
    routes = hashed_routes(ids, mask, 2)
    assert 0 < routes.sum() < len(routes)  # both pipelines are used, so the comparison can fail
    expected = by_domain(ids, mask, domain_ids=routes).logits
    for domain_ids in (None, torch.zeros_like(routes), 1 - routes):
        torch.testing.assert_close(hashed(ids, mask, domain_ids=domain_ids).logits, expected)
    # and routing by the domain instead gives other logits
    assert not torch.allclose(by_domain(ids, mask, domain_ids=1 - routes).logits, expected)


def test_a_pipeline_view_forces_its_pipeline_on_every_row():
    hashed, by_domain = _net(domain_router="hashed"), _net()
    by_domain.load_state_dict(hashed.state_dict())
    ids, mask, _ = _multidomain_batch(n=8)
    ids = ids.clamp(max=39)
    for d in (0, 1):
        forced = torch.full((ids.size(0),), d)
        torch.testing.assert_close(PipelineView(hashed, d)(ids, mask).logits,
                                   by_domain(ids, mask, domain_ids=forced).logits)


@pytest.mark.parametrize("kwargs", [dict(domain_split_layers=0), dict(domain_router_balance=0.1)])
def test_hashed_routing_needs_a_split_layer_and_takes_no_balance(kwargs):
    with pytest.raises(ConfigError, match="model.domain_router"):
        ModelConfig(**{**SMALL, "domain_router": "hashed", **kwargs})
