"""A Hugging Face BERT-style encoder behind headlab's named points, so `measure_probe` measures it.

The measurement seam (`headlab.measure`) needs `net.blocks[i].attn.hook_pattern` and
`net(input_ids, attention_mask, return_patterns=True)`. `HFEncoder` provides them without
touching transformers' code: a forward hook on each layer's self-attention module (eager
attention returns `(context [batch, seq, head * d_head], pattern [batch, head, q, k])`) passes
the pattern through `hook_pattern` and each head's context through its gate and `hook_z`, before
the output projection (`attention.output.dense`). transformers 5 removed `head_mask`; the gate is
what head ablation and gradient importance use instead: 0 removes exactly that head's
contribution, and the gate stays differentiable.

Named points of `HFEncoder.blocks[i].attn`, with TransformerLens' names and layouts as on headlab's
own model (`headlab.model.hooks`; `HFEncoder.run_with_hooks` takes the same hooks). Read them;
replacing `hook_pattern`'s output does not change the forward, the context was already computed
from the pattern:

    hook_pattern  [batch, head_index, query_pos, key_pos]  softmax attention, as `output_attentions` returns it
    hook_z        [batch, pos, head_index, d_head]         each head's context after its gate (replaceable)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from headlab.errors import ConfigError
from headlab.model.attention import HeadWeights
from headlab.model.hooks import HookedModule, HookPoint, name_hook_points


@dataclass
class EncoderOutput:
    hidden: Tensor  # [batch, seq, d_model] last hidden state
    patterns: list[Tensor] | None  # one [batch, head, q, k] per layer when return_patterns


class HFHeadAttention(nn.Module):
    """Named points, per-head weight views and a gate for one HF self-attention layer."""

    def __init__(self, self_attn: nn.Module, out_dense: nn.Linear, layer: int, encoder: HFEncoder) -> None:
        super().__init__()
        self.n_heads = int(self_attn.num_attention_heads)
        self.d_head = int(self_attn.attention_head_size)
        self.layer = layer
        self.hook_pattern = HookPoint()  # [batch, head_index, query_pos, key_pos]
        self.hook_z = HookPoint()  # [batch, pos, head_index, d_head]
        # plain attributes, not submodules: the HF model owns these parameters
        object.__setattr__(self, "_self_attn", self_attn)
        object.__setattr__(self, "_out_dense", out_dense)
        object.__setattr__(self, "_encoder", encoder)
        self._handle = self_attn.register_forward_hook(self._on_attention)

    def _on_attention(self, module: nn.Module, args: Any, output: tuple[Tensor, Tensor | None]) -> tuple[Tensor, Tensor]:
        context, pattern = output[0], output[1]
        if pattern is None:
            raise RuntimeError(f"layer {self.layer} returned no attention weights: load the model with "
                               "attn_implementation='eager'")
        pattern = self.hook_pattern(pattern)
        batch, seq, _ = context.shape
        z = context.view(batch, seq, self.n_heads, self.d_head)  # [batch, pos, head_index, d_head]
        gate = self._encoder.active_gates[self.layer]
        z = self.hook_z(z * gate.to(z.dtype)[:, None])
        return z.reshape(batch, seq, self.n_heads * self.d_head), pattern

    def head_weights(self) -> HeadWeights:
        """Per-head views in headlab's layout: W_Q/K/V `[head, d_model, d_head]`, W_O `[head, d_head, d_model]`."""
        a, o = self._self_attn, self._out_dense
        h, dh = self.n_heads, self.d_head
        return HeadWeights(
            W_Q=self._per_head_in(a.query.weight), W_K=self._per_head_in(a.key.weight),
            W_V=self._per_head_in(a.value.weight), W_O=o.weight.view(-1, h, dh).permute(1, 2, 0),
            b_Q=a.query.bias.view(h, dh), b_K=a.key.bias.view(h, dh), b_V=a.value.bias.view(h, dh), b_O=o.bias,
        )

    def head_weight_grads(self) -> tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None]:
        """Gradients of W_Q, W_K, W_V, W_O in `head_weights()` layout (None: no gradient)."""
        a, o = self._self_attn, self._out_dense
        grads = [None if w.grad is None else self._per_head_in(w.grad.detach()) for w in (a.query.weight, a.key.weight,
                                                                                         a.value.weight)]
        g_o = o.weight.grad
        return (*grads, None if g_o is None else g_o.detach().view(-1, self.n_heads, self.d_head).permute(1, 2, 0))

    def _per_head_in(self, w: Tensor) -> Tensor:
        """[head * d_head, d_model] -> [head, d_model, d_head] (a view)."""
        return w.view(self.n_heads, self.d_head, -1).transpose(1, 2)


class HFEncoder(HookedModule):
    """A BERT-style HF encoder (`encoder.layer[i].attention.self` / `.output.dense`) with named points.

    `head_gates` `[layer, head]` (a buffer, ones) scales each head's context before the output
    projection; `forward(..., head_gates=g)` uses `g` for one call (e.g. a tensor that requires
    grad, for gradient importance).
    """

    def __init__(self, model: nn.Module, source: str = "model") -> None:
        super().__init__()
        layers = _bert_layers(model, source)
        if getattr(model.config, "_attn_implementation", "eager") != "eager":
            raise ConfigError("model", source, "a model loaded with attn_implementation='eager' "
                              f"(got {model.config._attn_implementation!r}, which returns no attention weights)")
        self.model = model
        self.blocks = nn.ModuleList(
            nn.Module() for _ in layers
        )
        for i, layer in enumerate(layers):
            self.blocks[i].attn = HFHeadAttention(layer.attention.self, layer.attention.output.dense, i, self)
        n_heads = max(block.attn.n_heads for block in self.blocks)
        self.register_buffer("head_gates", torch.ones(len(layers), n_heads))
        self.active_gates: Tensor = self.head_gates
        name_hook_points(self)  # blocks.{i}.attn.hook_z, as on headlab's own model
        self.train(model.training)  # a fresh nn.Module says training; the wrapped model decides

    @property
    def n_heads(self) -> int:
        return int(self.head_gates.shape[1])

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
        return EncoderOutput(out.last_hidden_state, patterns if return_patterns else None)

    def set_head_gate(self, layer: int, head: int, value: float) -> None:
        self.head_gates[layer, head] = value

    def reset_head_gates(self) -> None:
        self.head_gates.fill_(1.0)


def _bert_layers(model: nn.Module, source: str) -> list[nn.Module]:
    """`model.encoder.layer`, checked to have BERT's self-attention layout."""
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    expected = "a BERT-style encoder with attention outputs (encoder.layer[i].attention.self and .output.dense)"
    if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        raise ConfigError("model", source, f"{expected}; {type(model).__name__} has none")
    for layer in layers:
        attn = getattr(layer, "attention", None)
        self_attn, output = getattr(attn, "self", None), getattr(attn, "output", None)
        if not all(hasattr(self_attn, k) for k in ("query", "key", "value", "num_attention_heads", "attention_head_size")) \
                or not isinstance(getattr(output, "dense", None), nn.Linear):
            raise ConfigError("model", source, f"{expected}; {type(model).__name__} differs")
    return list(layers)
