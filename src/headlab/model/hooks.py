"""Read a model's named points: every layer's attention pattern, without running the tail.

Named points of `MultiHeadSelfAttention` (identity modules; register a forward hook to read or
replace the tensor, see `headlab.model.attention` for what each holds):

    blocks[i].attn.hook_q        [batch, head, seq, d_head]  queries, after RoPE (both paths)
    blocks[i].attn.hook_k        [batch, head, seq, d_head]  keys, after RoPE (both paths)
    blocks[i].attn.hook_v        [batch, head, seq, d_head]  values (both paths)
    blocks[i].attn.hook_scores   [batch, head, q, k]  q.k^T / sqrt(d_head) + bias, pre-softmax (weight path)
    blocks[i].attn.hook_pattern  [batch, head, q, k]  softmax(scores), pre-dropout (weight path)
    blocks[i].attn.hook_z        [batch, head, seq, d_head]  each head's output after its gate (both paths)

The contract `capture_patterns` relies on (any model that meets it can be measured, e.g. a
Hugging Face encoder behind an adapter): `net.blocks` is a sequence of layers, each with an
`attn.hook_pattern` module whose output is that layer's pattern `[batch, head, q, k]`, and
`net(input_ids, attention_mask, return_patterns=True)` runs every layer's weight path.
"""

from __future__ import annotations

from typing import Any

import torch


class _PatternsCaptured(Exception):
    """Raised by the last layer's pattern hook: nothing after it changes any pattern."""


def capture_patterns(net: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> list[torch.Tensor]:
    """Every layer's pattern `[batch, head, q, k]` through the weight path, skipping the tail.

    The same patterns as `net(..., return_patterns=True).patterns`, but the forward stops at the
    last layer's `hook_pattern`: that layer's value mixing, out-projection and MLP, the pooling
    and the classifier cannot change a pattern, and they are about 40% of the weight-path
    forward of a 2-layer model.
    """
    patterns: list[torch.Tensor] = []
    last = net.blocks[-1].attn.hook_pattern

    def grab(module: torch.nn.Module, args: Any, output: torch.Tensor) -> None:
        patterns.append(output)
        if module is last:
            raise _PatternsCaptured

    handles = [block.attn.hook_pattern.register_forward_hook(grab) for block in net.blocks]
    try:
        net(input_ids, attention_mask, return_patterns=True)
    except _PatternsCaptured:
        pass
    finally:
        for handle in handles:
            handle.remove()
    if len(patterns) != len(net.blocks):
        raise RuntimeError(f"captured {len(patterns)} attention patterns for {len(net.blocks)} layers")
    return patterns
