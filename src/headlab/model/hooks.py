"""Named points as TransformerLens has them: `HookPoint`, `run_with_hooks`, and pattern capture.

Named points of `MultiHeadSelfAttention`, under `blocks.{i}.attn.` (the names, layouts and
places of TransformerLens' `HookedTransformer`, so a hook written for it runs unchanged here):

    hook_q, hook_k      [batch, pos, head_index, d_head]  queries, keys, before RoPE (both paths)
    hook_rot_q, hook_rot_k  [batch, pos, head_index, d_head]  after RoPE; only in a RoPE layer (both paths)
    hook_v              [batch, pos, head_index, d_head]  values (both paths)
    hook_attn_scores    [batch, head_index, query_pos, key_pos]  q.k^T / sqrt(d_head) + bias, pre-softmax
                        (padding and causal keys at finfo.min, ALiBi added; weight path only)
    hook_pattern        [batch, head_index, query_pos, key_pos]  softmax(scores), pre-dropout (weight path only)
    hook_z              [batch, pos, head_index, d_head]  each head's output after its gate (both paths)

The attention computes on `[batch, head, seq, d_head]` (what SDPA takes); a point sees the
permuted view, and its output is permuted back, so an unhooked point changes no number.

Two ways to hook: a TransformerLens hook `fn(tensor, hook)` (`hook.name` is the point's path;
return a replacement tensor or None) through `HookPoint.add_hook` or `run_with_hooks`, or a plain
PyTorch forward hook `fn(module, args, output)` through `register_forward_hook`; both work.

The contract `capture_patterns` relies on (any model that meets it can be measured, e.g. a
Hugging Face encoder behind an adapter): `net.blocks` is a sequence of layers, each with an
`attn.hook_pattern` module whose output is that layer's pattern `[batch, head, q, k]`, and
`net(input_ids, attention_mask, return_patterns=True)` runs every layer's weight path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Union

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from headlab.errors import HeadlabError

HookFn = Callable[[torch.Tensor, "HookPoint"], Union[torch.Tensor, None]]
NameOrFilter = Union[str, Callable[[str], bool]]


class HookPoint(nn.Identity):
    """An identity module with a name, where TransformerLens-style hooks read or replace a tensor.

    `name` is the point's path in its network (`blocks.0.attn.hook_z`), set by `name_hook_points`;
    None for a layer used on its own.
    """

    def __init__(self) -> None:
        super().__init__()
        self.name: str | None = None
        self._hook_handles: list[RemovableHandle] = []

    def add_hook(self, fn: HookFn) -> RemovableHandle:
        """Call `fn(output, hook=self)` on every forward; a tensor it returns replaces the output."""
        def forward_hook(module: nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor | None:
            return fn(output, hook=self)

        handle = self.register_forward_hook(forward_hook)
        self._hook_handles.append(handle)
        return handle

    def remove_hooks(self) -> None:
        """Remove every hook added through `add_hook` (plain `register_forward_hook` ones stay)."""
        for handle in self._hook_handles:
            handle.remove()
        self._hook_handles = []

    def layer(self) -> int:
        """The layer index of a point named `blocks.{layer}....`."""
        parts = (self.name or "").split(".")
        if len(parts) < 2 or parts[0] != "blocks" or not parts[1].isdigit():
            raise HeadlabError(f"hook point {self.name!r} is not under blocks.{{layer}}")
        return int(parts[1])

    def extra_repr(self) -> str:
        return repr(self.name) if self.name is not None else ""


def name_hook_points(root: nn.Module) -> dict[str, HookPoint]:
    """Every `HookPoint` under `root` by its module path, each given that path as its `name`."""
    points = {name: module for name, module in root.named_modules() if isinstance(module, HookPoint)}
    for name, point in points.items():
        point.name = name
    return points


@contextmanager
def hooks(root: nn.Module, fwd_hooks: Sequence[tuple[NameOrFilter, HookFn]]) -> Iterator[None]:
    """Add TransformerLens-style forward hooks for the block, and remove exactly those afterwards.

    `fwd_hooks`: `(name, fn)` for one point, or `(filter, fn)` with `filter(name) -> bool` for
    every point it accepts; an unknown name is an error, before any hook is added.
    """
    points = name_hook_points(root)
    targets: list[tuple[HookPoint, HookFn]] = []
    for name_or_filter, fn in fwd_hooks:
        if isinstance(name_or_filter, str):
            if name_or_filter not in points:
                raise HeadlabError(f"no hook point {name_or_filter!r}; this network has "
                                   f"{', '.join(points) or 'none'}")
            targets.append((points[name_or_filter], fn))
        elif callable(name_or_filter):
            targets.extend((point, fn) for name, point in points.items() if name_or_filter(name))
        else:
            raise HeadlabError(f"a forward hook needs a hook point name or a filter on names; got {name_or_filter!r}")
    handles = [point.add_hook(fn) for point, fn in targets]
    try:
        yield
    finally:
        for (point, _), handle in zip(targets, handles):
            handle.remove()
            if handle in point._hook_handles:  # a remove_hooks() inside the block took it already
                point._hook_handles.remove(handle)


class HookedModule(nn.Module):
    """A network with named points: `hook_dict`, `hooks(...)` and `run_with_hooks(...)`, as in TransformerLens."""

    @property
    def hook_dict(self) -> dict[str, HookPoint]:
        """Every named point by its path (`blocks.0.attn.hook_z`)."""
        return name_hook_points(self)

    def hooks(self, fwd_hooks: Sequence[tuple[NameOrFilter, HookFn]]) -> AbstractContextManager[None]:
        """Context manager: `fwd_hooks` are active inside, removed afterwards (see `headlab.model.hooks.hooks`)."""
        return hooks(self, fwd_hooks)

    def run_with_hooks(self, *inputs: Any, fwd_hooks: Sequence[tuple[NameOrFilter, HookFn]] = (),
                       **kwargs: Any) -> Any:
        """`self(*inputs, **kwargs)` with `fwd_hooks` added for this one call and removed afterwards."""
        with hooks(self, fwd_hooks):
            return self(*inputs, **kwargs)


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
