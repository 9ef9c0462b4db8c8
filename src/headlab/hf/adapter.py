"""Any Hugging Face encoder or decoder behind headlab's named points, so `measure_probe` measures it.

The measurement seam (`headlab.measure`) needs `net.blocks[i].attn.hook_pattern` and
`net(input_ids, attention_mask, return_patterns=True)`. `HFModel` provides them without touching
transformers' code, the same way for every family of `headlab.hf.families`: a forward hook on each
layer's attention module (eager attention returns `(output, pattern [batch, head, q, k])`) passes
the pattern through `hook_pattern`, and a forward pre-hook on the output projection passes each
head's context through its gate and `hook_z`. transformers 5 removed `head_mask`; the gate is what
head ablation and gradient importance use instead: 0 removes exactly that head's contribution, and
the gate stays differentiable. Per-family adapters (not TransformerLens' `HookedTransformer`) keep
the numbers those of the HF model itself: docs/pretrained.md says why.

Named points of `HFModel.blocks[i].attn`, with TransformerLens' names and layouts as on headlab's
own model (`headlab.model.hooks`; `HFModel.run_with_hooks` takes the same hooks). Read them;
replacing `hook_pattern`'s output does not change the forward, the context was already computed
from the pattern:

    hook_pattern  [batch, head_index, query_pos, key_pos]  softmax attention, as `output_attentions` returns it
    hook_z        [batch, pos, head_index, d_head]         each head's context after its gate (replaceable)

A decoder (`family.decoder`, loaded as a causal LM) also gives `logits` and `W_E` / `W_U`, the
contract of `headlab.measure.lm_probe.measure_lm_probe`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from headlab.errors import ConfigError
from headlab.hf.families import Family, LayerParts, family_of
from headlab.model.attention import HeadWeights
from headlab.model.hooks import HookedModule, HookPoint, name_hook_points


@dataclass
class EncoderOutput:
    hidden: Tensor | None  # [batch, seq, d_model] last hidden state (encoders)
    patterns: list[Tensor] | None  # one [batch, head, q, k] per layer when return_patterns
    logits: Tensor | None = None  # [batch, seq, vocab] next-token logits (decoders)


class HFHeadAttention(nn.Module):
    """Named points, per-head weight views and a gate for one HF attention layer."""

    def __init__(self, parts: LayerParts, layer: int, owner: HFModel) -> None:
        super().__init__()
        self.n_heads, self.d_head, self.layer = parts.n_heads, parts.d_head, layer
        self.hook_pattern = HookPoint()  # [batch, head_index, query_pos, key_pos]
        self.hook_z = HookPoint()  # [batch, pos, head_index, d_head]
        # plain attributes, not submodules: the HF model owns these parameters
        object.__setattr__(self, "_parts", parts)
        object.__setattr__(self, "_owner", owner)
        self._handles = [parts.attention.register_forward_hook(self._on_attention),
                         parts.out_proj.register_forward_pre_hook(self._on_context)]

    def _on_attention(self, module: nn.Module, args: Any, output: tuple[Tensor, ...]) -> None:
        pattern = output[1] if isinstance(output, tuple) and len(output) > 1 else None
        if pattern is None:
            raise RuntimeError(f"layer {self.layer} returned no attention weights: load the model with "
                               "attn_implementation='eager'")
        self.hook_pattern(pattern)

    def _on_context(self, module: nn.Module, args: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        context = args[0]  # [batch, seq, head * d_head], head-major in every family
        lead = context.shape[:-1]
        z = context.reshape(*lead, self.n_heads, self.d_head)
        gate = self._owner.active_gates[self.layer, : self.n_heads]
        z = self.hook_z(z * gate.to(z.dtype)[:, None])
        return (z.reshape(*lead, self.n_heads * self.d_head), *args[1:])

    def head_weights(self) -> HeadWeights:
        """Per-head weights in headlab's layout: W_Q/K/V `[head, d_model, d_head]`, W_O `[head, d_head, d_model]`."""
        weights = self._parts.split(lambda p: None if p is None else p.detach())
        assert weights is not None
        return weights

    def head_weight_grads(self) -> tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None]:
        """Gradients of W_Q, W_K, W_V, W_O in `head_weights()` layout (None: no gradient yet)."""
        grads = self._parts.split(lambda p: None if p is None or p.grad is None else p.grad.detach())
        return (None, None, None, None) if grads is None else (grads.W_Q, grads.W_K, grads.W_V, grads.W_O)


class HFModel(HookedModule):
    """An HF encoder (AutoModel) or causal LM (AutoModelForCausalLM) of a known family, with named points.

    `head_gates` `[layer, head]` (a buffer, ones) scales each head's context before the output
    projection; `forward(..., head_gates=g)` uses `g` for one call (e.g. a tensor that requires
    grad, for gradient importance).
    """

    def __init__(self, model: nn.Module, source: str = "model", family: Family | None = None) -> None:
        super().__init__()
        if getattr(model.config, "_attn_implementation", "eager") != "eager":
            raise ConfigError("model", source, "a model loaded with attn_implementation='eager' "
                              f"(got {model.config._attn_implementation!r}, which returns no attention weights)")
        self.family = family or family_of(getattr(model.config, "model_type", None), source, "model")
        try:
            parts = self.family.layers(model)
        except AttributeError as exc:
            raise ConfigError("model", source, f"a {self.family.name} model laid out as transformers 5 lays it out "
                              f"({type(model).__name__}: {exc})") from None
        if not parts:
            raise ConfigError("model", source, f"a model with attention layers ({type(model).__name__} has none)")
        self.model = model
        self.blocks = nn.ModuleList(nn.Module() for _ in parts)
        for i, layer in enumerate(parts):
            self.blocks[i].attn = HFHeadAttention(layer, i, self)
        self.register_buffer("head_gates", torch.ones(len(parts), max(p.n_heads for p in parts)))
        self.active_gates: Tensor = self.head_gates
        name_hook_points(self)  # blocks.{i}.attn.hook_z, as on headlab's own model
        self.train(model.training)  # a fresh nn.Module says training; the wrapped model decides

    @property
    def n_heads(self) -> int:
        return int(self.head_gates.shape[1])

    @property
    def is_decoder(self) -> bool:
        return self.family.decoder

    @property
    def W_E(self) -> Tensor:
        """Token embedding `[vocab, d_model]`."""
        return self.model.get_input_embeddings().weight

    @property
    def W_U(self) -> Tensor:
        """Unembedding `[d_model, vocab]` (a decoder's LM head)."""
        return self.model.get_output_embeddings().weight.T

    def forward(self, input_ids: Tensor, attention_mask: Tensor, return_patterns: bool = False,
                head_gates: Tensor | None = None) -> EncoderOutput:
        """input_ids, attention_mask: [batch, seq] (1/True = real token); head_gates: [layer, head]."""
        if head_gates is not None and head_gates.shape != self.head_gates.shape:
            raise ValueError(f"expected head_gates of shape {tuple(self.head_gates.shape)}; got {tuple(head_gates.shape)}")
        patterns: list[Tensor] = []
        handles = [block.attn.hook_pattern.register_forward_hook(lambda m, a, out: patterns.append(out))
                   for block in self.blocks] if return_patterns else []
        self.active_gates = self.head_gates if head_gates is None else head_gates
        try:
            out = self.model(input_ids=input_ids, attention_mask=attention_mask.long())
        finally:
            self.active_gates = self.head_gates
            for handle in handles:
                handle.remove()
        hidden = getattr(out, "last_hidden_state", None)
        return EncoderOutput(hidden, patterns if return_patterns else None, getattr(out, "logits", None))

    def set_head_gate(self, layer: int, head: int, value: float) -> None:
        self.head_gates[layer, head] = value

    def reset_head_gates(self) -> None:
        self.head_gates.fill_(1.0)


HFEncoder = HFModel  # the name of the BERT-only adapter it replaced; importance and the classifier use it
