"""The encoder classifier: embeddings, pre-norm blocks, pooling, a linear head.

Every measured tensor has a named place: `model.blocks[i].attn` (with `hook_q`, `hook_k`, `hook_v`,
`hook_rot_q`, `hook_rot_k` (RoPE), `hook_attn_scores`, `hook_pattern`, `hook_z`, named and laid out
as in TransformerLens, hooked through `model.run_with_hooks`; see `headlab.model.hooks`),
`model.head_gates` `[layer, head]`. `ModelConfig` describes the model as built; after `prune_heads`
the live head count of layer i is `model.blocks[i].attn.n_heads`.
"""

from __future__ import annotations

import copy
import operator
from dataclasses import dataclass
from typing import Iterable, Mapping

import torch
from torch import Tensor, nn

from headlab.errors import ConfigError
from headlab.model.attention import AttentionOutput, FixedPattern, MultiHeadSelfAttention, prune_block_heads
from headlab.model.config import ModelConfig
from headlab.model.domains import hashed_routes
from headlab.model.hooks import HookedModule, capture_patterns, name_hook_points
from headlab.model.init import init_weights
from headlab.model.posenc import ATTENTION_ENCODINGS, build_additive_encoding
from headlab.model.templates import template_weight


@dataclass
class ClassifierOutput:
    logits: Tensor  # [batch, n_classes]
    patterns: list[Tensor] | None  # one [batch, head, q, k] per layer when return_patterns
    template_kl: Tensor | None = None  # [] mean KL(template || head) over soft templated heads, when asked


class MLP(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.fc = nn.Linear(d_model, d_ff)
        self.act = nn.GELU()
        self.proj = nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """x: [batch, seq, d_model] -> [batch, seq, d_model]."""
        return self.drop(self.proj(self.act(self.fc(x))))


class Block(nn.Module):
    """Pre-norm block: x + attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, config: ModelConfig, template: list[str] | None = None, n_domains: int = 1) -> None:
        super().__init__()
        position = config.pos_encoding if config.pos_encoding in ATTENTION_ENCODINGS else "none"
        self.ln_1 = nn.LayerNorm(config.d_model)
        self.attn = MultiHeadSelfAttention(config.d_model, config.n_heads, config.d_head,
                                           attn_dropout=config.attn_dropout, causal=config.causal, position=position,
                                           template=template, template_mode=config.template_mode,
                                           n_domains=n_domains, domain_router=config.domain_router)
        self.drop = nn.Dropout(config.dropout)
        self.ln_2 = nn.LayerNorm(config.d_model)
        self.mlp = MLP(config.d_model, config.ff_dim, config.dropout)

    def forward(self, x: Tensor, attention_mask: Tensor, *, need_weights: bool = False,
                head_gate: Tensor | None = None, template_kl: bool = False,
                fixed_pattern: FixedPattern | None = None, domain_ids: Tensor | None = None) -> tuple[Tensor, AttentionOutput]:
        """x: [batch, seq, d_model] -> (x, the attention's output: pattern [batch, head, q, k] or None, KL)."""
        attn = self.attn(self.ln_1(x), attention_mask, need_weights=need_weights, head_gate=head_gate,
                         template_kl=template_kl, fixed_pattern=fixed_pattern, domain_ids=domain_ids)
        x = x + self.drop(attn.output)
        x = x + self.mlp(self.ln_2(x))
        return x, attn


class HeadlabClassifier(HookedModule):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_id)
        self.pos_enc = build_additive_encoding(config.pos_encoding, config.max_len, config.d_model)
        self.drop = nn.Dropout(config.dropout)
        templates = config.templates or [None] * config.n_layers
        split = config.domain_split_layers
        if split and config.n_domains is None:
            raise ValueError("model.domain_split_layers > 0 needs model.n_domains (set from the data's domain count)")
        self.blocks = nn.ModuleList(Block(config, template, config.n_domains if layer < split else 1)
                                    for layer, template in enumerate(templates))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.classifier = nn.Linear(config.d_model, config.n_classes)
        # [layer, head]; after ragged pruning the row of layer i is padded with 0 beyond its live heads
        self.register_buffer("head_gates", torch.ones(config.n_layers, config.n_heads))
        self.frozen_patterns: FrozenPatterns | None = None  # see freeze_patterns
        init_weights(self, config.init_scale)
        for block in self.blocks:  # the extra domains' Q/K/V get the same per-head init as domain 0's
            for extra in block.attn.domain_qkv or []:
                extra.reset_parameters(block.attn.n_heads, block.attn.d_head, config.init_scale)
        name_hook_points(self)  # hook.name = "blocks.0.attn.hook_z", also for plain-PyTorch users

    def forward(self, input_ids: Tensor, attention_mask: Tensor, return_patterns: bool = False,
                head_gates: Tensor | None = None, template_kl: bool = False,
                domain_ids: Tensor | None = None, pipeline_ids: Tensor | None = None) -> ClassifierOutput:
        """input_ids, attention_mask: [batch, seq]; head_gates: [layer, head] (default: the buffer);
        template_kl: also return the mean KL(template || head) over the soft templated heads;
        domain_ids: [batch], each row's domain, its Q/K/V pipeline in the domain-split layers unless
        `model.domain_router` routes otherwise (headlab.model.domains); pipeline_ids: [batch], a
        pipeline forced on each row whatever the router (`PipelineView`)."""
        self._check_inputs(input_ids, attention_mask, head_gates)
        mask = attention_mask.bool()
        if pipeline_ids is not None:
            domain_ids = pipeline_ids
        elif self.config.domain_router == "hashed" and self.config.domain_split_layers:
            domain_ids = hashed_routes(input_ids, mask, int(self.config.n_domains))
        gates = self.head_gates if head_gates is None else head_gates
        x = self.drop(self.pos_enc(self.tok_emb(input_ids)))  # [batch, seq, d_model]
        patterns = [] if return_patterns else None
        kls = []
        fixed = self.frozen_patterns(input_ids, mask) if self.frozen_patterns is not None else {}
        for layer, block in enumerate(self.blocks):
            x, attn = block(x, mask, need_weights=return_patterns, head_gate=gates[layer, : block.attn.n_heads],
                            template_kl=template_kl, fixed_pattern=fixed.get(layer), domain_ids=domain_ids)
            if patterns is not None:
                patterns.append(attn.pattern)
            if attn.template_kl is not None:
                kls.append(attn.template_kl)
        pooled = self._pool(self.ln_f(x), mask)  # [batch, d_model]
        return ClassifierOutput(self.classifier(self.drop(pooled)), patterns, torch.cat(kls).mean() if kls else None)

    def _pool(self, x: Tensor, mask: Tensor) -> Tensor:
        """x: [batch, seq, d_model] -> [batch, d_model]: position 0 ([CLS]) or mean over real tokens."""
        if self.config.pooling == "cls":
            return x[:, 0]
        weight = mask.unsqueeze(-1).to(x.dtype)  # [batch, seq, 1]
        return (x * weight).sum(dim=1) / weight.sum(dim=1).clamp(min=1.0)

    def _check_inputs(self, input_ids: Tensor, attention_mask: Tensor, head_gates: Tensor | None) -> None:
        if input_ids.dim() != 2 or attention_mask.shape != input_ids.shape:
            raise ValueError("expected input_ids and attention_mask of one shape [batch, seq]; got "
                             f"{tuple(input_ids.shape)} and {tuple(attention_mask.shape)}")
        if input_ids.size(1) > self.config.max_len:
            raise ConfigError("model.max_len", self.config.max_len,
                              f"at least the batch's sequence length {input_ids.size(1)} (or truncate the data)")
        if head_gates is not None and head_gates.shape != self.head_gates.shape:
            raise ValueError(f"expected head_gates of shape {tuple(self.head_gates.shape)}; "
                             f"got {tuple(head_gates.shape)}")

    def template_loss_weight(self, step: int) -> float:
        """The weight of the soft-template KL in the training loss at `step`; 0 without soft templated heads."""
        if self.config.template_mode != "soft" or all(block.attn.template is None for block in self.blocks):
            return 0.0
        return template_weight(step, self.config.template_weight, self.config.template_anneal_steps)

    @property
    def heads_per_layer(self) -> list[int]:
        """Live head count of each layer (differs from config.n_heads after pruning)."""
        return [block.attn.n_heads for block in self.blocks]

    def set_head_gate(self, layer: int, head: int, value: float) -> None:
        if not 0 <= layer < len(self.blocks) or not 0 <= head < self.blocks[layer].attn.n_heads:
            raise ValueError(f"no head ({layer}, {head}); heads per layer: {self.heads_per_layer}")
        self.head_gates[layer, head] = value

    def reset_head_gates(self) -> None:
        """All live heads back to 1 (padding slots of pruned layers stay 0)."""
        self.head_gates.zero_()
        for layer, n_heads in enumerate(self.heads_per_layer):
            self.head_gates[layer, :n_heads] = 1.0

    def freeze_patterns(self, heads: Mapping[int, Iterable[int]], state: Mapping[str, Tensor] | None = None) -> None:
        """From now on, heads `{layer: [head]}` attend as the network does NOW (or as the network
        with weights `state` does): a frozen copy computes their patterns from each input, and those
        patterns replace the heads' own (a hard template taken from the model; V/O still train).

        Costs one weight-path forward of the frozen copy per forward. The copy is not a submodule:
        it is neither trained nor in `state_dict()` (`frozen_state()` gives it, for checkpoints).
        """
        heads = {operator.index(layer): sorted({operator.index(h) for h in hs}) for layer, hs in heads.items()}
        for layer, hs in heads.items():
            if not 0 <= layer < len(self.blocks) or not all(0 <= h < self.blocks[layer].attn.n_heads for h in hs):
                raise ValueError(f"no heads {hs} in layer {layer}; heads per layer: {self.heads_per_layer}")
            templated = set(hs) & set(self.blocks[layer].attn._heads("hard"))
            if templated:
                raise ValueError(f"heads {sorted(templated)} of layer {layer} already have a hard template")
        self.frozen_patterns = None  # the copy must not carry (and recurse into) a freezer of its own
        frozen = copy.deepcopy(self).eval().requires_grad_(False)
        if state is not None:
            frozen.load_state_dict(state)
        self.frozen_patterns = FrozenPatterns(frozen, heads)

    def frozen_state(self) -> dict[str, Tensor] | None:
        """The frozen copy's weights (None: no frozen patterns)."""
        return None if self.frozen_patterns is None else self.frozen_patterns.network.state_dict()

    def prune_heads(self, heads: Mapping[int, Iterable[int]]) -> None:
        """Remove heads physically, `{layer: [current head indices]}`; same logits as gating them to 0.

        `head_gates` keeps the gate values of surviving heads. If layers end with different head
        counts it becomes `[layer, max heads]`, each row padded with 0 beyond its live heads
        (those slots are ignored by forward). Build the optimizer after pruning.
        """
        keep = prune_block_heads(self.blocks, heads)  # every layer checked first: none is left half-pruned
        gates = self.head_gates.new_zeros(len(self.blocks), max(len(k) for k in keep))
        for layer, kept in enumerate(keep):
            gates[layer, : len(kept)] = self.head_gates[layer, kept]
        self.head_gates = gates


class FrozenPatterns:
    """Patterns of some heads computed by a frozen copy of the network (see `freeze_patterns`)."""

    def __init__(self, network: HeadlabClassifier, heads: dict[int, list[int]]) -> None:
        self.network, self.heads = network, heads

    @torch.no_grad()
    def __call__(self, input_ids: Tensor, attention_mask: Tensor) -> dict[int, FixedPattern]:
        """{layer: FixedPattern} for `input_ids`, `attention_mask` `[batch, seq]`."""
        patterns = capture_patterns(self.network, input_ids, attention_mask)  # [batch, head, q, k] per layer
        return {layer: FixedPattern(torch.tensor(hs, device=input_ids.device), patterns[layer][:, hs])
                for layer, hs in self.heads.items() if hs}


def count_parameters(model: nn.Module, non_embedding: bool = True) -> int:
    """Number of parameters; without token/position embedding tables when `non_embedding`.

    Embedding lookups cost no FLOPs, so the non-embedding count is the one FLOP estimates use.
    """
    total = sum(p.numel() for p in model.parameters())
    if non_embedding:
        total -= sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Embedding))
    return total
