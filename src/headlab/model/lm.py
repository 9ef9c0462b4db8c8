"""A causal language model with the classifier's attention: the induction-head literature's model.

Token embedding (+ an additive position encoding), `n_layers` pre-norm blocks of causal
`MultiHeadSelfAttention` (the same layer, named points and weight path as the classifier, so
`capture_patterns` and every probe measurement apply unchanged), optionally no MLP (`attn_only`,
as in Elhage et al. 2021 / Olsson et al. 2022) and no LayerNorm (`layer_norm=false`, so the
OV and QK circuits are plain products of weights), then an unembedding, tied to the token
embedding (`tied_unembed`) or its own matrix. The next-token loss is on every position.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from headlab.errors import ConfigError
from headlab.model.attention import MultiHeadSelfAttention, prune_block_heads
from headlab.model.encoder import MLP
from headlab.model.hooks import HookedModule, name_hook_points
from headlab.model.init import init_weights
from headlab.model.posenc import ATTENTION_ENCODINGS, POS_ENCODINGS, PosEncoding, build_additive_encoding


@dataclass
class LMConfig:
    """The causal LM as built; every field checked here, with the key as the user writes it."""

    vocab_size: int
    max_len: int
    n_layers: int = 2
    n_heads: int = 4
    d_model: int = 64
    d_head: int | None = None  # None: d_model // n_heads
    d_ff: int | None = None  # None: 4 * d_model; unused when attn_only
    attn_only: bool = True
    layer_norm: bool = True
    tied_unembed: bool = False
    dropout: float = 0.0
    pos_encoding: PosEncoding = "learned"
    init_scale: float = 1.0  # Xavier gain of W_Q, W_K, W_V (headlab.model.init)

    def __post_init__(self) -> None:
        for key, minimum in (("vocab_size", 2), ("max_len", 2), ("n_layers", 1), ("n_heads", 1), ("d_model", 1)):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise ConfigError(f"model.{key}", value, f"an integer >= {minimum}")
        for key in ("attn_only", "layer_norm", "tied_unembed"):
            if not isinstance(getattr(self, key), bool):
                raise ConfigError(f"model.{key}", getattr(self, key), "true or false")
        if self.pos_encoding not in POS_ENCODINGS:
            raise ConfigError("model.pos_encoding", self.pos_encoding, f"one of {', '.join(POS_ENCODINGS)}")
        if self.d_head is None and self.d_model % self.n_heads:
            raise ConfigError("model.n_heads", self.n_heads, f"a divisor of d_model={self.d_model} when d_head is null")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError("model.dropout", self.dropout, "a probability in [0, 1)")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads if self.d_head is None else self.d_head


@dataclass
class LMOutput:
    logits: Tensor  # [batch, seq, vocab]
    patterns: list[Tensor] | None  # one [batch, head, q, k] per layer when return_patterns


class LMBlock(nn.Module):
    """x + attn(LN(x)), then (unless attn_only) x + MLP(LN(x)); LN is the identity without layer_norm."""

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        position = config.pos_encoding if config.pos_encoding in ATTENTION_ENCODINGS else "none"
        norm = (lambda: nn.LayerNorm(config.d_model)) if config.layer_norm else nn.Identity
        self.ln_1 = norm()
        self.attn = MultiHeadSelfAttention(config.d_model, config.n_heads, config.d_head, causal=True, position=position)
        self.drop = nn.Dropout(config.dropout)
        self.ln_2 = None if config.attn_only else norm()
        self.mlp = None if config.attn_only else MLP(config.d_model, config.d_ff or 4 * config.d_model, config.dropout)

    def forward(self, x: Tensor, mask: Tensor, need_weights: bool,
                head_gate: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        attn = self.attn(self.ln_1(x), mask, need_weights=need_weights, head_gate=head_gate)
        x = x + self.drop(attn.output)
        if self.mlp is not None:
            x = x + self.mlp(self.ln_2(x))
        return x, attn.pattern


class HeadlabLM(HookedModule):
    """Causal LM: `forward(input_ids, attention_mask)` -> logits `[batch, seq, vocab]` for the next token."""

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_enc = build_additive_encoding(config.pos_encoding, config.max_len, config.d_model)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(LMBlock(config) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(config.d_model) if config.layer_norm else nn.Identity()
        self.unembed = None if config.tied_unembed else nn.Linear(config.d_model, config.vocab_size, bias=False)
        init_weights(self, config.init_scale)
        name_hook_points(self)

    @property
    def W_E(self) -> Tensor:
        """`[vocab, d_model]`."""
        return self.tok_emb.weight

    @property
    def W_U(self) -> Tensor:
        """`[d_model, vocab]`; tied: W_E^T / sqrt(d_model), so N(0, 1) embeddings give O(1) logits."""
        if self.unembed is None:
            return self.tok_emb.weight.T / math.sqrt(self.config.d_model)
        return self.unembed.weight.T

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, return_patterns: bool = False,
                head_gates: Tensor | None = None, **_: Any) -> LMOutput:
        """input_ids `[batch, seq]`; attention_mask `[batch, seq]` (default: all real); head_gates
        `[layer, head]` multiplies each head's output (default: every head 1, as `head_gates` gives)."""
        if input_ids.dim() != 2:
            raise ValueError(f"expected input_ids [batch, seq]; got {tuple(input_ids.shape)}")
        if head_gates is not None and tuple(head_gates.shape) != (len(self.blocks), max(self.heads_per_layer)):
            raise ValueError(f"expected head_gates of shape {(len(self.blocks), max(self.heads_per_layer))}; "
                             f"got {tuple(head_gates.shape)}")
        if input_ids.size(1) > self.config.max_len:
            raise ConfigError("model.max_len", self.config.max_len, f"at least the sequence length {input_ids.size(1)}")
        mask = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
        x = self.drop(self.pos_enc(self.tok_emb(input_ids)))
        patterns = [] if return_patterns else None
        for layer, block in enumerate(self.blocks):
            gate = None if head_gates is None else head_gates[layer, : block.attn.n_heads]
            x, pattern = block(x, mask, need_weights=return_patterns, head_gate=gate)
            if patterns is not None:
                patterns.append(pattern)
        return LMOutput(self.ln_f(x) @ self.W_U, patterns)

    @property
    def heads_per_layer(self) -> list[int]:
        """Live head count of each layer (differs from config.n_heads after `prune_heads`)."""
        return [block.attn.n_heads for block in self.blocks]

    @property
    def head_gates(self) -> Tensor:
        """`[layer, max heads]`: 1 for each live head, 0 in a pruned layer's padding. Not a buffer (an LM
        keeps no gates of its own, so its checkpoints stay as they were); the layout the classifier's
        `head_gates` has, which the interventions (`headlab.interventions`) pass back as `head_gates=`."""
        counts = self.heads_per_layer
        gates = torch.zeros(len(counts), max(counts), device=self.tok_emb.weight.device)
        for layer, n in enumerate(counts):
            gates[layer, :n] = 1.0
        return gates

    def prune_heads(self, heads: Mapping[int, Iterable[int]]) -> None:
        """Remove heads physically, `{layer: [current head indices]}`: the same logits as gating them to 0
        (`HeadlabClassifier.prune_heads`' contract; `config` keeps the model as trained)."""
        prune_block_heads(self.blocks, heads)
