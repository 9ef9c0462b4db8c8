"""Per-domain Q/K/V (`model.domain_split_layers=k`): the first k layers keep one Q/K/V projection
per domain, chosen by each example's domain id; the layers above share one.

A split layer's own `q_proj`/`k_proj`/`v_proj` are domain 0's pipeline and `domain_qkv[d - 1]`
holds domain d's, so a split model differs from a shared one only by added modules and k=0 builds
exactly today's network. Each domain's rows go through that domain's projections only: a batch
without domain d never touches (never gives a gradient to) domain d's weights.

Without domain ids (`domain_ids=None`: the probe measurements, which carry no domain) a split
layer uses the mean of the domain pipelines' projections: one documented, domain-agnostic view.
A domain id outside [0, n_domains) (the datamodule's -1: a val/test domain not seen in train) is
refused: a split model has no pipeline for it.

`model.domain_router=soft` replaces the domain id by a learned router: each split layer mixes its
domain pipelines' Q/K/V with weights softmax(W x̄ + b) `[batch, n_domains]`, x̄ the layer input
averaged over the real tokens. Every pipeline then gets gradient from every row, and no domain id
is read, so unseen (or unknown, -1) domains at val/test are scored like any other text.

`model.domain_router=hashed` is the parameter-matched control of a split model: the same modules
and the same hard, one-pipeline-per-row routing, but each row's pipeline is a fixed hash of its
tokens (`hashed_routes`), so the routing carries (almost) no information about the row's domain.
Split-by-domain minus split-by-hash isolates what the domain id adds, not the extra Q/K/V
parameters. It needs no domain id anywhere, the probe included.

`model.domain_router_balance=w` (> 0, soft router only) adds w * `router_balance` to the training
loss: KL(mean router load || uniform), the load being each pipeline's weight averaged over the
batch, averaged over the split layers. 0 when every pipeline carries the same share of the batch,
ln(n_domains) when the router sends everything to one pipeline; it keeps the router from
collapsing onto one pipeline early.

`PipelineView(net, d)` is `net` with every split layer forced through domain d's Q/K/V (the
domain id d for every row; with a router, its weights one-hot on d): what measuring "domain d's
pipeline" on the probe runs (`headlab.sweep.domains`).
"""

from __future__ import annotations

from typing import Literal, Sequence, get_args

import torch
from torch import Tensor, nn

Router = Literal["none", "soft", "hashed"]
ROUTERS: tuple[str, ...] = get_args(Router)


class DomainQKV(nn.Module):
    """Q/K/V projections of one extra domain in a split layer (same shapes as the layer's own)."""

    def __init__(self, d_model: int, d_attn: int) -> None:
        super().__init__()
        self.q_proj = nn.Linear(d_model, d_attn)
        self.k_proj = nn.Linear(d_model, d_attn)
        self.v_proj = nn.Linear(d_model, d_attn)

    def reset_parameters(self, n_heads: int, d_head: int, gain: float) -> None:
        """headlab.model.init's Q/K/V init: Xavier-uniform per head block with `gain`, zero biases."""
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.zeros_(proj.bias)
            for head_block in proj.weight.data.view(n_heads, d_head, -1):  # [d_head, d_model]
                nn.init.xavier_uniform_(head_block, gain=gain)


def check_domain_ids(domain_ids: Tensor, batch: int, n_domains: int) -> None:
    """`domain_ids` must be `[batch]` integers in [0, n_domains)."""
    if domain_ids.shape != (batch,) or domain_ids.is_floating_point():
        raise ValueError(f"expected domain_ids as integers of shape ({batch},); got {domain_ids.dtype} {tuple(domain_ids.shape)}")
    bad = domain_ids[(domain_ids < 0) | (domain_ids >= n_domains)]
    if bad.numel():
        raise ValueError(f"domain id {int(bad[0])} has no Q/K/V pipeline (this model has {n_domains} domains; -1 marks a "
                         "val/test domain absent from the train split): a domain-split model cannot score it")


# Knuth's multiplicative constant spreads positions over 31 bits; PCG's odd 63-bit multiplier mixes the
# sum. Both are part of the model's definition: a checkpoint routes every text the same way anywhere.
_POSITION_MULTIPLIER = 2654435761
_MIX_MULTIPLIER = 6364136223846793005


def hashed_routes(input_ids: Tensor, attention_mask: Tensor, n_domains: int) -> Tensor:
    """`[batch]` pipeline per row in [0, n_domains): a hash of the row's real tokens, the same
    whatever the batch's padding. Position p's token is weighted by a fixed integer of p; the sum
    is mixed by a multiplier and its high bits pick the pipeline, so rows that differ in any token
    land on either pipeline about equally often, whatever their domain."""
    positions = torch.arange(1, input_ids.size(1) + 1, device=input_ids.device)
    weights = (positions * _POSITION_MULTIPLIER) % (2**31 - 1) + 1
    real = attention_mask.to(torch.long)
    total = (input_ids.to(torch.long) * weights * real).sum(dim=1)  # < 2^55 for any vocab and length here
    mixed = (total * _MIX_MULTIPLIER) >> 33  # int64 multiplication wraps; keep the well-mixed high bits
    return (mixed & 0x3FFFFFFF) % n_domains


def router_weights(router: nn.Linear, x: Tensor, attention_mask: Tensor) -> Tensor:
    """`[batch, n_domains]` softmax weights of the pipelines, from x `[batch, seq, d_model]` pooled over real tokens."""
    weight = attention_mask.unsqueeze(-1).to(x.dtype)  # [batch, seq, 1]
    pooled = (x * weight).sum(dim=1) / weight.sum(dim=1).clamp(min=1.0)
    return router(pooled).softmax(dim=-1)


def project_by_domain(projections: Sequence[nn.Linear], x: Tensor, domain_ids: Tensor | None,
                      weights: Tensor | None = None) -> Tensor:
    """x `[batch, seq, d_model]` -> `[batch, seq, d_out]`: with router `weights` `[batch, n_domains]`
    their mix of all pipelines; else row b through `projections[domain_ids[b]]`; without domain
    ids, the mean of all projections' outputs."""
    if weights is not None:
        return torch.einsum("bd,dbso->bso", weights.to(x.dtype), torch.stack([proj(x) for proj in projections]))
    if domain_ids is None:
        return torch.stack([proj(x) for proj in projections]).mean(dim=0)
    check_domain_ids(domain_ids, x.size(0), len(projections))
    out = None
    for domain, proj in enumerate(projections):
        rows = (domain_ids == domain).nonzero().squeeze(1)
        if rows.numel() == 0:
            continue  # never called: this domain's weights get no gradient from the batch
        part = proj(x.index_select(0, rows))
        out = part.new_zeros(x.shape[:-1] + part.shape[-1:]) if out is None else out
        out = out.index_copy(0, rows, part)
    return out


def router_balance(weights: Sequence[Tensor]) -> Tensor:
    """Mean over layers of KL(load || uniform), load `[n_domains]` = a layer's router `weights`
    `[batch, n_domains]` averaged over the batch: 0 for an even load, ln(n_domains) for a collapsed one."""
    terms = []
    for w in weights:
        load = w.mean(dim=0)
        terms.append((load * (load.clamp_min(1e-12) * load.numel()).log()).sum())
    return torch.stack(terms).mean()


class PipelineView(nn.Module):
    """`net` seen through domain `domain`'s pipeline in every split layer; layers above are shared.

    Has `blocks` and `net(input_ids, attention_mask, **kwargs)` like the network, so the probe
    measurement (`headlab.measure.measure_probe`) reads it unchanged. Nothing of `net` changes.
    """

    def __init__(self, net: nn.Module, domain: int) -> None:
        super().__init__()
        self.net, self.domain = net, domain

    @property
    def blocks(self) -> nn.ModuleList:
        return self.net.blocks

    def forward(self, input_ids: Tensor, attention_mask: Tensor, **kwargs):
        ids = torch.full((input_ids.size(0),), self.domain, dtype=torch.long, device=input_ids.device)
        routers = [block.attn.domain_router for block in self.net.blocks if block.attn.domain_router is not None]
        handles = [router.register_forward_hook(self._one_hot) for router in routers]
        try:
            return self.net(input_ids, attention_mask, pipeline_ids=ids, **kwargs)
        finally:
            for handle in handles:
                handle.remove()

    def _one_hot(self, module: nn.Module, args: object, logits: Tensor) -> Tensor:
        """Router logits -> -inf except at `domain`: its softmax is exactly one-hot."""
        forced = torch.full_like(logits, float("-inf"))
        forced[:, self.domain] = 0.0
        return forced
