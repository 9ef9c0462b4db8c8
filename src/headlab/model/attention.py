"""Multi-head self-attention with one forward and two paths.

The fast path (`need_weights=False`, used in training) calls
`torch.nn.functional.scaled_dot_product_attention` and returns no pattern. The weight path
(`need_weights=True`, used by the probe measurements) computes scores and softmax explicitly
and returns the pattern `[batch, head, q, k]`. Both see the same additive bias (padding,
causal, ALiBi), so they agree to float precision; a test holds them to it.

Heads are an index, not surgery: `head_gate[h]` scales head h's output before `out_proj`
(0 removes exactly its contribution, and the gate stays differentiable for importance scores),
`head_weights()` gives per-head views in TransformerLens layout (`head_weight_grads()` the same
views of the gradients), and `prune_heads` removes heads physically so compute really drops.

Named points (`HookPoint`s with TransformerLens' names and layouts; see `headlab.model.hooks`):
`hook_q`, `hook_k` (before RoPE), `hook_rot_q`, `hook_rot_k` (after it, RoPE layers only), `hook_v`
and `hook_z` (each head's output after its gate) `[batch, pos, head_index, d_head]` on both paths;
`hook_attn_scores` `[batch, head_index, query_pos, key_pos]` (q.k^T / sqrt(d_head) plus the additive
bias: padding and causal keys at finfo.min, ALiBi) and `hook_pattern` (softmax of the scores, before
dropout) on the weight path only, so the fast path never builds a `[batch, head, q, k]` tensor. The
computation stays on `[batch, head, seq, d_head]` (SDPA's layout): a point sees a permuted view and
its output is permuted back, so an unhooked point changes no number.

Templates (`headlab.model.templates`): a `hard` templated head's pattern is its template, built
from the mask (its Q/K are unused, so they get zero gradient; V/O train). SDPA cannot take a fixed
pattern, so the fast path runs SDPA for all heads and then recomputes the templated heads' outputs
as template @ v: one explicit `[batch, n_hard, q, k]` pattern and matmul per templated layer (the
cost of the weight path for those heads only). A `soft` templated head attends freely; when asked
(`template_kl=True`) the layer also returns KL(template || head) per soft head, from a second
`[batch, n_soft, q, k]` score computation. `fixed_pattern` gives other heads a pattern the same way
as a hard template (`freeze_pattern` interventions).

Per-domain Q/K/V (`n_domains > 1`, `headlab.model.domains`): `domain_qkv[d - 1]` holds domain d's
projections, `q_proj`/`k_proj`/`v_proj` are domain 0's; `forward(..., domain_ids=[batch])` sends each
row through its domain's. `head_weights()` and the weight metrics describe domain 0's pipeline;
`prune_heads` refuses a split layer. `domain_router="soft"`: a learned softmax mix of the
pipelines (`domain_router`, from the layer input pooled over real tokens) replaces the domain id.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headlab.model.domains import DomainQKV, project_by_domain, router_weights
from headlab.model.hooks import HookPoint
from headlab.model.posenc import ATTENTION_ENCODINGS, RotaryEmbedding, alibi_bias, alibi_slopes
from headlab.model.templates import FREE, build_layer_templates, check_pattern, template_kl
from headlab.model.templates import MODES as TEMPLATE_MODES


@dataclass
class AttentionOutput:
    output: Tensor  # [batch, seq, d_model]
    pattern: Tensor | None  # [batch, head, q, k], pre-dropout; None on the fast path
    template_kl: Tensor | None = None  # [n_soft_heads] KL(template || head); only when asked


@dataclass
class FixedPattern:
    """Heads whose pattern is given instead of computed: `heads` `[n]` (indices), `pattern` `[batch, n, q, k]`."""

    heads: Tensor
    pattern: Tensor


@dataclass
class HeadWeights:
    """Per-head views (they share storage with the projections) in TransformerLens layout."""

    W_Q: Tensor  # [head, d_model, d_head]
    W_K: Tensor  # [head, d_model, d_head]
    W_V: Tensor  # [head, d_model, d_head]
    W_O: Tensor  # [head, d_head, d_model]
    b_Q: Tensor  # [head, d_head]
    b_K: Tensor  # [head, d_head]
    b_V: Tensor  # [head, d_head]
    b_O: Tensor  # [d_model]


class MultiHeadSelfAttention(nn.Module):
    """Self-attention over `[batch, seq, d_model]`; `position` is `none`, `rope` or `alibi`.

    Additive position encodings (sinusoidal, learned) live at the embedding, not here.
    `template`: one pattern name per head (`free` for a learned head), enforced as `template_mode`.
    """

    def __init__(self, d_model: int, n_heads: int, d_head: int | None = None, *, attn_dropout: float = 0.0,
                 causal: bool = False, position: str = "none", template: Iterable[str] | None = None,
                 template_mode: str = "hard", n_domains: int = 1, domain_router: str = "none") -> None:
        super().__init__()
        if position not in ("none",) + ATTENTION_ENCODINGS:
            raise ValueError(f"attention-level position must be one of none, rope, alibi; got {position!r}")
        self.d_model, self.n_heads = d_model, n_heads
        self.d_head = d_model // n_heads if d_head is None else d_head
        self.attn_dropout, self.causal = attn_dropout, causal
        d_attn = n_heads * self.d_head
        self.q_proj = nn.Linear(d_model, d_attn)
        self.k_proj = nn.Linear(d_model, d_attn)
        self.v_proj = nn.Linear(d_model, d_attn)
        self.out_proj = nn.Linear(d_attn, d_model)
        self.rotary = RotaryEmbedding(self.d_head) if position == "rope" else None
        slopes = alibi_slopes(n_heads) if position == "alibi" else None
        self.register_buffer("alibi_slopes", slopes, persistent=False)  # [head] or None
        # named points, TransformerLens layouts (headlab.model.hooks)
        self.hook_q = HookPoint()  # [batch, pos, head_index, d_head]; before RoPE
        self.hook_k = HookPoint()  # [batch, pos, head_index, d_head]; before RoPE
        self.hook_rot_q = HookPoint() if self.rotary is not None else None  # as hook_q, after RoPE
        self.hook_rot_k = HookPoint() if self.rotary is not None else None  # as hook_k, after RoPE
        self.hook_v = HookPoint()  # [batch, pos, head_index, d_head]
        self.hook_attn_scores = HookPoint()  # [batch, head_index, query_pos, key_pos]; pre-softmax; weight path only
        self.hook_pattern = HookPoint()  # [batch, head_index, query_pos, key_pos]; weight path only
        self.hook_z = HookPoint()  # [batch, pos, head_index, d_head]; per-head output after the gate
        names = [check_pattern(name) for name in template] if template is not None else [FREE] * n_heads
        if len(names) != n_heads:
            raise ValueError(f"expected one template pattern per head ({n_heads}); got {len(names)}")
        if template_mode not in TEMPLATE_MODES:
            raise ValueError(f"template_mode must be one of {TEMPLATE_MODES}; got {template_mode!r}")
        self.template = names if any(name != FREE for name in names) and template_mode != "free" else None
        self.template_mode = template_mode
        # domains 1..n-1 of a split layer (domain 0 is q_proj/k_proj/v_proj); None in a shared layer
        self.domain_qkv = nn.ModuleList(DomainQKV(d_model, d_attn) for _ in range(n_domains - 1)) if n_domains > 1 else None
        # model.domain_router=soft: a learned mix of the pipelines replaces the domain id
        self.domain_router = nn.Linear(d_model, n_domains) if n_domains > 1 and domain_router == "soft" else None

    def forward(self, x: Tensor, attention_mask: Tensor, *, need_weights: bool = False,
                head_gate: Tensor | None = None, fixed_pattern: FixedPattern | None = None,
                template_kl: bool = False, domain_ids: Tensor | None = None) -> AttentionOutput:
        """x: [batch, seq, d_model]; attention_mask: [batch, seq] (True = real); head_gate: [head];
        template_kl: also return KL(template || head) of the soft templated heads;
        domain_ids: [batch], which Q/K/V pipeline each row takes in a split layer (ignored in a shared one)."""
        self._check_inputs(x, attention_mask, head_gate)
        if self.domain_qkv is None:
            q, k, v = (self._split_heads(proj(x)) for proj in (self.q_proj, self.k_proj, self.v_proj))
        else:
            weights = router_weights(self.domain_router, x, attention_mask.bool()) if self.domain_router is not None else None
            q, k, v = (self._split_heads(project_by_domain(projs, x, domain_ids, weights)) for projs in self.domain_projections())
        q, k, v = _through(self.hook_q, q), _through(self.hook_k, k), _through(self.hook_v, v)
        if self.rotary is not None:
            q, k = _through(self.hook_rot_q, self.rotary(q)), _through(self.hook_rot_k, self.rotary(k))
        bias = self._score_bias(attention_mask.bool(), x.size(1), x.dtype)  # [batch, 1|head, 1|q, k]
        dropout_p = self.attn_dropout if self.training else 0.0
        scale = 1.0 / math.sqrt(self.d_head)
        fixed = self._fixed_patterns(attention_mask, fixed_pattern)
        kl = self._soft_template_kl(q, k, bias, attention_mask, scale) if template_kl and self._heads("soft") else None
        pattern = None
        if need_weights:
            scores = (q @ k.transpose(-2, -1)).mul_(scale).add_(bias)  # in place: no extra [batch, head, q, k] copies
            pattern = self.hook_attn_scores(scores).softmax(dim=-1)
            if fixed is not None:
                pattern = pattern.index_copy(1, fixed.heads, fixed.pattern.to(pattern.dtype))
            pattern = self.hook_pattern(pattern)
            z = F.dropout(pattern, dropout_p) @ v
        else:
            z = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout_p, scale=scale)
            if fixed is not None:
                given = F.dropout(fixed.pattern.to(v.dtype), dropout_p) @ v.index_select(1, fixed.heads)
                z = z.index_copy(1, fixed.heads, given)
        if head_gate is not None:
            z = z * head_gate.to(z.dtype)[:, None, None]
        z = self.hook_z(z.transpose(1, 2))  # [batch, pos, head_index, d_head]
        return AttentionOutput(self.out_proj(z.flatten(2)), pattern, kl)

    def domain_projections(self) -> tuple[list[nn.Linear], list[nn.Linear], list[nn.Linear]]:
        """The Q, K and V projections of every domain, domain 0 first (one each in a shared layer)."""
        extra = list(self.domain_qkv or [])
        return ([self.q_proj] + [m.q_proj for m in extra], [self.k_proj] + [m.k_proj for m in extra],
                [self.v_proj] + [m.v_proj for m in extra])

    def _heads(self, mode: str) -> list[int]:
        """The heads templated in `mode` (hard or soft)."""
        if self.template is None or self.template_mode != mode:
            return []
        return [h for h, name in enumerate(self.template) if name != FREE]

    def _fixed_patterns(self, attention_mask: Tensor, given: FixedPattern | None) -> FixedPattern | None:
        """The hard templates of this layer, built from the mask, plus the patterns `given`."""
        hard = self._heads("hard")
        if not hard:
            return given
        heads = torch.tensor(hard, device=attention_mask.device)
        built = FixedPattern(heads, build_layer_templates([self.template[h] for h in hard], attention_mask, self.causal))
        if given is None:
            return built
        return FixedPattern(torch.cat([built.heads, given.heads]), torch.cat([built.pattern, given.pattern.to(built.pattern.dtype)], 1))

    def _soft_template_kl(self, q: Tensor, k: Tensor, bias: Tensor, attention_mask: Tensor, scale: float) -> Tensor:
        """KL(template || head) `[n_soft]` of the soft templated heads, from their own scores."""
        soft = self._heads("soft")
        heads = torch.tensor(soft, device=q.device)
        head_bias = bias.index_select(1, heads) if bias.dim() == 4 and bias.size(1) > 1 else bias
        scores = (q.index_select(1, heads) @ k.index_select(1, heads).transpose(-2, -1)) * scale + head_bias
        template = build_layer_templates([self.template[h] for h in soft], attention_mask, self.causal)
        return template_kl(template.to(scores.dtype), scores.log_softmax(dim=-1), attention_mask)

    def _split_heads(self, t: Tensor) -> Tensor:
        """[batch, seq, head * d_head] -> [batch, head, seq, d_head]."""
        return t.unflatten(-1, (self.n_heads, self.d_head)).transpose(1, 2)

    def _score_bias(self, mask: Tensor, seq_len: int, dtype: torch.dtype) -> Tensor:
        """Additive bias `[batch, 1|head, 1|q, k]`: ALiBi, and finfo.min where a key is not allowed.

        finfo.min rather than -inf: a padded key still gets exactly 0 (exp underflows), and a
        row with no allowed key (an all-padding sequence) stays uniform instead of NaN.
        """
        allowed = mask[:, None, None, :]  # [batch, 1, 1, k]
        if self.causal:
            allowed = allowed & torch.ones(seq_len, seq_len, dtype=torch.bool, device=mask.device).tril()
        bias = torch.zeros((), dtype=dtype, device=mask.device)
        if self.alibi_slopes is not None:
            bias = alibi_bias(self.alibi_slopes, seq_len).to(dtype)  # [head, q, k]
        return torch.where(allowed, bias, torch.finfo(dtype).min)

    def _check_inputs(self, x: Tensor, attention_mask: Tensor, head_gate: Tensor | None) -> None:
        if x.dim() != 3 or x.size(-1) != self.d_model:
            raise ValueError(f"expected x of shape [batch, seq, {self.d_model}]; got {tuple(x.shape)}")
        if attention_mask.shape != x.shape[:2]:
            raise ValueError(f"expected attention_mask of shape {tuple(x.shape[:2])}; "
                             f"got {tuple(attention_mask.shape)}")
        if head_gate is not None and head_gate.shape != (self.n_heads,):
            raise ValueError(f"expected head_gate of shape ({self.n_heads},); got {tuple(head_gate.shape)}")

    def head_weights(self) -> HeadWeights:
        """Per-head views of the projections; W_Q[h] maps d_model -> d_head for head h."""
        h, dh = self.n_heads, self.d_head
        return HeadWeights(
            W_Q=self._per_head_in(self.q_proj.weight), W_K=self._per_head_in(self.k_proj.weight),
            W_V=self._per_head_in(self.v_proj.weight), W_O=self._per_head_out(self.out_proj.weight),
            b_Q=self.q_proj.bias.view(h, dh), b_K=self.k_proj.bias.view(h, dh), b_V=self.v_proj.bias.view(h, dh),
            b_O=self.out_proj.bias,
        )

    def head_weight_grads(self) -> tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None]:
        """This step's gradients of W_Q, W_K, W_V, W_O in `head_weights()` layout (None: no gradient)."""
        grads = (self.q_proj.weight.grad, self.k_proj.weight.grad, self.v_proj.weight.grad)
        g_o = self.out_proj.weight.grad
        return (*(None if g is None else self._per_head_in(g.detach()) for g in grads),
                None if g_o is None else self._per_head_out(g_o.detach()))

    def _per_head_in(self, w: Tensor) -> Tensor:
        """[head * d_head, d_model] -> [head, d_model, d_head] (a view)."""
        return w.view(self.n_heads, self.d_head, -1).transpose(1, 2)

    def _per_head_out(self, w: Tensor) -> Tensor:
        """[d_model, head * d_head] -> [head, d_head, d_model] (a view)."""
        return w.view(-1, self.n_heads, self.d_head).permute(1, 2, 0)

    def prune_heads(self, heads: Iterable[int]) -> list[int]:
        """Remove `heads` (current indices) physically; returns the kept current indices.

        The output equals gating those heads to 0. Projections are replaced by new nn.Linear
        modules, so build the optimizer after pruning.
        """
        if self.domain_qkv is not None:
            raise ValueError("prune_heads does not support a domain-split layer (model.domain_split_layers)")
        keep = heads_to_keep(self.n_heads, heads)
        index = torch.tensor(keep, device=self.q_proj.weight.device)
        columns = (index[:, None] * self.d_head + torch.arange(self.d_head, device=index.device)).flatten()
        self.q_proj = _select_linear(self.q_proj, columns, dim=0)
        self.k_proj = _select_linear(self.k_proj, columns, dim=0)
        self.v_proj = _select_linear(self.v_proj, columns, dim=0)
        self.out_proj = _select_linear(self.out_proj, columns, dim=1)
        if self.alibi_slopes is not None:
            self.alibi_slopes = self.alibi_slopes[index]
        if self.template is not None:
            kept = [self.template[h] for h in keep]
            self.template = kept if any(name != FREE for name in kept) else None
        self.n_heads = len(keep)
        return keep


def _through(point: HookPoint, per_head: Tensor) -> Tensor:
    """Pass `[batch, head, seq, d_head]` through `point` as `[batch, pos, head_index, d_head]` (views both ways)."""
    return point(per_head.transpose(1, 2)).transpose(1, 2)


def prune_block_heads(blocks: Sequence[nn.Module], heads: Mapping[int, Iterable[int]]) -> list[list[int]]:
    """Remove heads `{layer: [current head indices]}` from the attention of each of `blocks`, every layer
    checked before any is changed; returns per layer the current indices kept (the classifier's and the
    LM's `prune_heads`)."""
    heads = {operator.index(layer): list(hs) for layer, hs in heads.items()}
    bad = sorted(layer for layer in heads if not 0 <= layer < len(blocks))
    if bad:
        raise ValueError(f"layers to prune must be in [0, {len(blocks)}); got {bad}")
    keep = [heads_to_keep(block.attn.n_heads, heads.get(layer, [])) for layer, block in enumerate(blocks)]
    for layer, hs in heads.items():
        blocks[layer].attn.prune_heads(hs)
    return keep


def heads_to_keep(n_heads: int, heads: Iterable[int]) -> list[int]:
    """Validate a set of heads to prune and return the sorted heads that remain."""
    drop = {operator.index(h) for h in heads}  # ints, numpy ints and 0-d integer tensors
    bad = sorted(h for h in drop if not 0 <= h < n_heads)
    if bad:
        raise ValueError(f"heads to prune must be in [0, {n_heads}); got {bad}")
    if len(drop) == n_heads:
        raise ValueError(f"cannot prune all {n_heads} heads of a layer; keep at least one")
    return [h for h in range(n_heads) if h not in drop]


def _select_linear(linear: nn.Linear, index: Tensor, dim: int) -> nn.Linear:
    """A new Linear keeping `index` along weight dim 0 (outputs) or 1 (inputs)."""
    weight = linear.weight.detach().index_select(dim, index)
    new = nn.Linear(weight.size(1), weight.size(0), bias=linear.bias is not None,
                    device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        new.weight.copy_(weight)
        if linear.bias is not None:
            new.bias.copy_(linear.bias[index] if dim == 0 else linear.bias)
    return new
