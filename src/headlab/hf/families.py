"""Where each Hugging Face architecture family keeps its attention: the one table `HFModel` reads.

Every family's eager attention module returns `(output, weights [batch, head, q, k])`, and every
family concatenates the heads' contexts `[batch, seq, head * d_head]` (head-major) right before its
output projection. So one seam serves all: a forward hook on the attention module reads the
pattern, a forward pre-hook on the output projection gates each head's context. What differs is
only naming and how the Q/K/V weights are packed, which `Family` records:

    family      layers                              attention / output projection       Q, K, V packing
    bert        [model.]encoder.layer[i]            attention.self / attention.output.dense   query, key, value (Linear)
    roberta, electra: as bert (same module tree)
    distilbert  transformer.layer[i]                attention / attention.out_lin       q_lin, k_lin, v_lin (Linear)
    gpt2        transformer.h[i]                    attn / attn.c_proj (Conv1D)         c_attn fused [q | k | v] (Conv1D: x @ W)
    gpt_neox    gpt_neox.layers[i]                  attention / attention.dense         query_key_value fused per head [head, (q, k, v), d_head]
    llama       model.layers[i]                     self_attn / self_attn.o_proj        q_proj, k_proj, v_proj (grouped K/V heads repeated)

Per-head weights come out in headlab's layout (TransformerLens'): W_Q/K/V `[head, d_model, d_head]`,
W_O `[head, d_head, d_model]`; missing biases are zeros. Rotary models (gpt_neox, llama) rotate Q
and K after these projections: the weight-space tables compare the projections, as TransformerLens does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor, nn

from headlab.errors import ConfigError
from headlab.model.attention import HeadWeights

Get = Callable[[nn.Parameter | None], Tensor | None]  # a parameter -> itself (weights) or its .grad


@dataclass(frozen=True)
class LayerParts:
    """One layer's attention module (returns the pattern), output projection (gated), head shape."""

    attention: nn.Module
    out_proj: nn.Module
    n_heads: int
    d_head: int
    split: Callable[[Get], HeadWeights | None]  # per-head W_Q/K/V/O in headlab's layout (None: a grad is missing)


@dataclass(frozen=True)
class Family:
    name: str
    decoder: bool  # causal LM: measured with the LM scores on repeated random tokens as well
    layers: Callable[[nn.Module], list[LayerParts]]


def _linear_heads(w: Tensor, n_heads: int, d_head: int) -> Tensor:
    """nn.Linear weight `[head * d_head, d_model]` -> `[head, d_model, d_head]`."""
    return w.reshape(n_heads, d_head, -1).transpose(1, 2)


def _bias(b: Tensor | None, n_heads: int, d_head: int, like: Tensor) -> Tensor:
    return torch.zeros(n_heads, d_head, dtype=like.dtype, device=like.device) if b is None else b.reshape(n_heads, d_head)


def _out_linear(o: nn.Linear, get: Get, n_heads: int, d_head: int) -> tuple[Tensor, Tensor] | None:
    """nn.Linear output projection `[d_model, head * d_head]` -> W_O `[head, d_head, d_model]`, b_O."""
    w = get(o.weight)
    if w is None:
        return None
    b = get(o.bias) if o.bias is not None else None
    return w.reshape(-1, n_heads, d_head).permute(1, 2, 0), (torch.zeros(w.shape[0], dtype=w.dtype) if b is None else b)


def _separate(q: nn.Linear, k: nn.Linear, v: nn.Linear, o: nn.Linear, n_heads: int, d_head: int,
              n_kv: int | None = None) -> Callable[[Get], HeadWeights | None]:
    """Separate Q, K, V Linears (BERT, DistilBERT, Llama); K/V with `n_kv` < `n_heads` heads are repeated
    so head h reads K/V head h // (n_heads / n_kv), as grouped-query attention does."""
    n_kv = n_kv or n_heads

    def split(get: Get) -> HeadWeights | None:
        ws = [get(m.weight) for m in (q, k, v)]
        out = _out_linear(o, get, n_heads, d_head)
        if any(w is None for w in ws) or out is None:
            return None
        group = n_heads // n_kv
        W = [_linear_heads(w, h, d_head) for w, h in zip(ws, (n_heads, n_kv, n_kv))]
        B = [_bias(get(m.bias) if m.bias is not None else None, h, d_head, ws[0])
             for m, h in zip((q, k, v), (n_heads, n_kv, n_kv))]
        if group > 1:
            W[1:], B[1:] = [w.repeat_interleave(group, 0) for w in W[1:]], [b.repeat_interleave(group, 0) for b in B[1:]]
        return HeadWeights(W_Q=W[0], W_K=W[1], W_V=W[2], W_O=out[0], b_Q=B[0], b_K=B[1], b_V=B[2], b_O=out[1])

    return split


def _bert_layers(model: nn.Module) -> list[LayerParts]:
    base = getattr(model, "base_model", model)
    out = []
    for layer in base.encoder.layer:
        a, o = layer.attention.self, layer.attention.output.dense
        h, dh = int(a.num_attention_heads), int(a.attention_head_size)
        out.append(LayerParts(a, o, h, dh, _separate(a.query, a.key, a.value, o, h, dh)))
    return out


def _distilbert_layers(model: nn.Module) -> list[LayerParts]:
    base = getattr(model, "base_model", model)
    out = []
    for layer in base.transformer.layer:
        a = layer.attention
        h = int(a.n_heads)
        dh = int(a.dim // h)
        out.append(LayerParts(a, a.out_lin, h, dh, _separate(a.q_lin, a.k_lin, a.v_lin, a.out_lin, h, dh)))
    return out


def _gpt2_layers(model: nn.Module) -> list[LayerParts]:
    base = getattr(model, "base_model", model)
    out = []
    for block in base.h:
        a = block.attn
        h, dh, d = int(a.num_heads), int(a.head_dim), int(a.embed_dim)

        def split(get: Get, a=a, h=h, dh=dh, d=d) -> HeadWeights | None:
            w, wo = get(a.c_attn.weight), get(a.c_proj.weight)  # Conv1D: [in, out], y = x @ W + b
            if w is None or wo is None:
                return None
            b, bo = get(a.c_attn.bias), get(a.c_proj.bias)
            W = [w[:, i * d:(i + 1) * d].reshape(d, h, dh).permute(1, 0, 2) for i in range(3)]
            B = [b[i * d:(i + 1) * d].reshape(h, dh) if b is not None else torch.zeros(h, dh) for i in range(3)]
            return HeadWeights(W_Q=W[0], W_K=W[1], W_V=W[2], W_O=wo.reshape(h, dh, -1), b_Q=B[0], b_K=B[1], b_V=B[2],
                               b_O=bo if bo is not None else torch.zeros(wo.shape[1]))

        out.append(LayerParts(a, a.c_proj, h, dh, split))
    return out


def _neox_layers(model: nn.Module) -> list[LayerParts]:
    base = getattr(model, "base_model", model)
    out = []
    for layer in base.layers:
        a = layer.attention
        h, dh = int(model.config.num_attention_heads), int(a.head_size)

        def split(get: Get, a=a, h=h, dh=dh) -> HeadWeights | None:
            w = get(a.query_key_value.weight)
            o = _out_linear(a.dense, get, h, dh)
            if w is None or o is None:
                return None
            packed = w.reshape(h, 3, dh, -1)  # rows: head, (q, k, v), d_head
            b = get(a.query_key_value.bias) if a.query_key_value.bias is not None else None
            bias = b.reshape(h, 3, dh) if b is not None else torch.zeros(h, 3, dh, dtype=w.dtype)
            W = [packed[:, i].transpose(1, 2) for i in range(3)]
            return HeadWeights(W_Q=W[0], W_K=W[1], W_V=W[2], W_O=o[0], b_Q=bias[:, 0], b_K=bias[:, 1], b_V=bias[:, 2],
                               b_O=o[1])

        out.append(LayerParts(a, a.dense, h, dh, split))
    return out


def _llama_layers(model: nn.Module) -> list[LayerParts]:
    base = getattr(model, "base_model", model)
    cfg = model.config
    out = []
    for layer in base.layers:
        a = layer.self_attn
        h, dh = int(cfg.num_attention_heads), int(a.head_dim)
        n_kv = int(getattr(cfg, "num_key_value_heads", None) or h)
        out.append(LayerParts(a, a.o_proj, h, dh, _separate(a.q_proj, a.k_proj, a.v_proj, a.o_proj, h, dh, n_kv)))
    return out


FAMILIES: dict[str, Family] = {
    "bert": Family("bert", False, _bert_layers),
    "roberta": Family("roberta", False, _bert_layers),
    "electra": Family("electra", False, _bert_layers),
    "distilbert": Family("distilbert", False, _distilbert_layers),
    "gpt2": Family("gpt2", True, _gpt2_layers),
    "gpt_neox": Family("gpt_neox", True, _neox_layers),
    "llama": Family("llama", True, _llama_layers),
}


def family_of(model_type: str | None, source: str, key: str = "model.path") -> Family:
    """The family of a config's `model_type`; a ConfigError naming the ones headlab reads otherwise."""
    if model_type not in FAMILIES:
        raise ConfigError(key, source, f"a model of a family headlab reads ({', '.join(FAMILIES)}); "
                          f"its config says model_type={model_type!r}")
    return FAMILIES[model_type]
