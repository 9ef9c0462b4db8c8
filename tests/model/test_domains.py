"""Per-domain Q/K/V (model.domain_split_layers): routing, gradients, the k=0 default, bad configs."""

from __future__ import annotations

import pytest
import torch

from headlab.errors import ConfigError
from headlab.model import HeadlabClassifier, ModelConfig

SMALL = dict(vocab_size=20, n_classes=2, max_len=16, n_layers=2, n_heads=2, d_model=16, dropout=0.0)


def _net(seed: int = 0, **kwargs) -> HeadlabClassifier:
    torch.manual_seed(seed)
    return HeadlabClassifier(ModelConfig(**{**SMALL, **kwargs})).eval()


def _batch(n: int = 4, seq: int = 10):
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 20, (n, seq), generator=gen)
    mask = torch.ones(n, seq, dtype=torch.bool)
    mask[1, 7:] = False
    return ids, mask


def _shared_copy_of_domain(split: HeadlabClassifier, domain: int) -> HeadlabClassifier:
    """A shared model whose split layers' Q/K/V are `domain`'s: the independent reference."""
    shared = _net(**{k: v for k, v in split.config.__dict__.items() if k in SMALL})
    state = {k: v for k, v in split.state_dict().items() if "domain_qkv" not in k}
    shared.load_state_dict(state)
    for block, ref in zip(split.blocks, shared.blocks):
        for projs, target in zip(block.attn.domain_projections(), (ref.attn.q_proj, ref.attn.k_proj, ref.attn.v_proj)):
            target.load_state_dict(projs[min(domain, len(projs) - 1)].state_dict())
    return shared


def test_k0_is_bit_identical_to_the_shared_model():
    ids, mask = _batch()
    today, with_keys = _net(), _net(domain_split_layers=0, n_domains=3)
    assert today.state_dict().keys() == with_keys.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(today.state_dict().values(), with_keys.state_dict().values()))
    assert torch.equal(today(ids, mask).logits, with_keys(ids, mask, domain_ids=torch.tensor([0, 1, 2, 0])).logits)


def test_each_row_goes_through_its_own_domain_pipeline():
    net = _net(domain_split_layers=1, n_domains=3)
    assert net.blocks[0].attn.domain_qkv is not None and net.blocks[1].attn.domain_qkv is None
    ids, mask = _batch()
    domains = torch.tensor([2, 0, 1, 2])
    logits = net(ids, mask, domain_ids=domains).logits
    for d in range(3):
        ref = _shared_copy_of_domain(net, d)(ids, mask).logits
        rows = domains == d
        torch.testing.assert_close(logits[rows], ref[rows], rtol=1e-5, atol=1e-6)
    # the domains' pipelines really differ (independent init), so routing changes the output
    assert not torch.allclose(logits[0], net(ids, mask, domain_ids=torch.tensor([0, 0, 1, 2])).logits[0])


def test_a_domain_a_batch_gives_no_gradient_to_domain_b_qkv():
    net = _net(domain_split_layers=2, n_domains=2).train()
    ids, mask = _batch()
    net(ids, mask, domain_ids=torch.zeros(4, dtype=torch.long)).logits.sum().backward()
    for block in net.blocks:
        q, k, v = block.attn.domain_projections()
        for proj in (q[1], k[1], v[1]):
            assert proj.weight.grad is None and proj.bias.grad is None
        for proj in (q[0], k[0], v[0]):
            assert proj.weight.grad is not None and proj.weight.grad.abs().sum() > 0


def test_without_domain_ids_a_split_layer_uses_the_mean_pipeline():
    net = _net(domain_split_layers=1, n_domains=2)
    ids, mask = _batch()
    ref = _shared_copy_of_domain(net, 0)
    q, k, v = net.blocks[0].attn.domain_projections()
    for projs, target in zip((q, k, v), (ref.blocks[0].attn.q_proj, ref.blocks[0].attn.k_proj, ref.blocks[0].attn.v_proj)):
        target.weight.data = (projs[0].weight + projs[1].weight).detach() / 2
        target.bias.data = (projs[0].bias + projs[1].bias).detach() / 2
    torch.testing.assert_close(net(ids, mask).logits, ref(ids, mask).logits, rtol=1e-5, atol=1e-6)


def test_an_unknown_or_out_of_range_domain_id_is_refused():
    net = _net(domain_split_layers=1, n_domains=2)
    ids, mask = _batch()
    for bad in (-1, 2):
        with pytest.raises(ValueError, match=f"domain id {bad} has no Q/K/V pipeline"):
            net(ids, mask, domain_ids=torch.tensor([0, bad, 1, 0]))


@pytest.mark.parametrize("kwargs, key", [
    (dict(domain_split_layers=3, n_domains=2), "model.domain_split_layers"),
    (dict(domain_split_layers=1, n_domains=0), "model.domain_split_layers"),
    (dict(domain_split_layers=-1), "model.domain_split_layers"),
])
def test_bad_domain_configs_name_the_key(kwargs, key):
    with pytest.raises(ConfigError, match=key):
        ModelConfig(**{**SMALL, **kwargs})


def test_prune_refuses_a_split_layer():
    with pytest.raises(ValueError, match="domain-split layer"):
        _net(domain_split_layers=1, n_domains=2).prune_heads({0: [1]})
