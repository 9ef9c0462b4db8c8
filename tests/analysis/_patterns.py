"""Hand-constructed attention patterns with known roles, and padding helpers for the tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

Builder = Callable[[int], Tensor]  # n -> [n, n] rows summing to 1


def one_target(targets: Tensor) -> Tensor:
    """`[n, n]` one-hot rows: query i attends to `targets[i]` only."""
    n = targets.shape[0]
    pattern = torch.zeros(n, n, dtype=torch.float64)
    pattern[torch.arange(n), targets] = 1.0
    return pattern


def uniform(n: int) -> Tensor:
    return torch.full((n, n), 1.0 / n, dtype=torch.float64)


def identity(n: int) -> Tensor:
    return torch.eye(n, dtype=torch.float64)


def previous_token(n: int) -> Tensor:
    """Each query attends to the previous token; query 0 (no previous token) to itself."""
    return one_target((torch.arange(n) - 1).clamp_min(0))


def back_offset(offset: int) -> Builder:
    """Attend `offset` tokens back; queries with no such token attend to [CLS] (position 0)."""
    return lambda n: one_target((torch.arange(n) - offset).clamp_min(0))


def first_content(n: int) -> Tensor:
    """Every query attends to the first token after [CLS]."""
    return one_target(torch.ones(n, dtype=torch.long))


def cls_staring(n: int) -> Tensor:
    return one_target(torch.zeros(n, dtype=torch.long))


def last_staring(n: int) -> Tensor:
    return one_target(torch.full((n,), n - 1, dtype=torch.long))


def near_uniform(n: int, seed: int = 0) -> Tensor:
    scores = 0.3 * torch.randn(n, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return scores.softmax(-1)


def window(radius: int) -> Builder:
    """Uniform over keys within `radius` of the query."""

    def build(n: int) -> Tensor:
        pos = torch.arange(n)
        near = ((pos[:, None] - pos[None, :]).abs() <= radius).double()
        return near / near.sum(-1, keepdim=True)

    return build


def random_rows(n: int, generator: torch.Generator) -> Tensor:
    """Peaky random softmax rows (so heads differ and no map is constant)."""
    return (2.0 * torch.randn(n, n, generator=generator, dtype=torch.float64)).softmax(-1)


def padded_batch(maps: Sequence[Sequence[Tensor]], pad_to: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Stack `maps[seq][head] = [n_seq, n_seq]` into `pattern [batch, head, pad_to, pad_to]`, `mask`.

    Padded keys of real rows are 0 (as a masked softmax gives); padded query rows are filled with
    random junk that sums to 1 over all positions, so a metric that looks at them changes.
    """
    generator = torch.Generator().manual_seed(seed)
    n_heads = len(maps[0])
    pattern = torch.rand(len(maps), n_heads, pad_to, pad_to, generator=generator, dtype=torch.float64)
    pattern = pattern / pattern.sum(-1, keepdim=True)
    mask = torch.zeros(len(maps), pad_to, dtype=torch.bool)
    for b, heads in enumerate(maps):
        n = heads[0].shape[0]
        mask[b, :n] = True
        pattern[b, :, :n, :] = 0.0
        pattern[b, :, :n, :n] = torch.stack(list(heads))
    return pattern, mask


def pad_positions(flags: Sequence[Sequence[bool]], pad_to: int) -> Tensor:
    """`[batch, pad_to]` bool mask from per-sequence flags (padding False)."""
    out = torch.zeros(len(flags), pad_to, dtype=torch.bool)
    for b, row in enumerate(flags):
        out[b, : len(row)] = torch.tensor(list(row), dtype=torch.bool)
    return out
