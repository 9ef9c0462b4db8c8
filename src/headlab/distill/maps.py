"""Which teacher layer and heads each student layer learns from.

Layer maps (`layer_map`), student layer -> teacher layer, for `n_student` <= or >= `n_teacher`:
- ``uniform``: student layer l <- teacher layer round((l + 1) * T / S) - 1 (TinyBERT's g(m) = m T/S);
- ``last``: only the last student layer, from the last teacher layer (MiniLM);
- ``first_middle``: student layers spread over the teacher's first half (layers 0 .. T/2 - 1),
  the shallow and middle layers the founding article prefers aligning (its 5.3);
- an explicit list of teacher layers, one per student layer (None = not distilled).

Head maps, for teachers with another head count:
- `mean_head_groups`: average consecutive groups of teacher heads (an average of distributions is
  a distribution), when the teacher's head count is a multiple of the student's;
- `relation_heads` (MiniLMv2): concatenate all heads' queries (or keys, values) and re-split them
  into any number of relation heads, then softmax(X X^T / sqrt(d)) per relation head, so a 12-head
  teacher and a 4-head student compare on the same number of relations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from headlab.errors import ConfigError

LAYER_MAPS = ("uniform", "last", "first_middle")


def layer_map(kind: str | Sequence[int | None], n_teacher: int, n_student: int,
              key: str = "distill.layer_map") -> list[int | None]:
    """Teacher layer for each student layer (None: that student layer is not distilled).

    >>> layer_map("uniform", 6, 2), layer_map("last", 6, 2), layer_map("first_middle", 6, 2)
    ([2, 5], [None, 5], [0, 2])
    >>> layer_map([1, None], 6, 2)
    [1, None]
    """
    if n_teacher < 1 or n_student < 1:
        raise ConfigError(key, kind, f"models with layers (teacher {n_teacher}, student {n_student})")
    if isinstance(kind, str):
        if kind == "uniform":
            return [max(0, round((layer + 1) * n_teacher / n_student) - 1) for layer in range(n_student)]
        if kind == "last":
            return [None] * (n_student - 1) + [n_teacher - 1]
        if kind == "first_middle":
            top = max(0, n_teacher // 2 - 1)
            return [round(layer * top / (n_student - 1)) if n_student > 1 else top for layer in range(n_student)]
        raise ConfigError(key, kind, f"one of {list(LAYER_MAPS)} or a list of {n_student} teacher layers")
    explicit = list(kind)
    if len(explicit) != n_student or any(t is not None and not (isinstance(t, int) and 0 <= t < n_teacher)
                                         for t in explicit):
        raise ConfigError(key, explicit, f"{n_student} entries, each a teacher layer 0..{n_teacher - 1} or null")
    return explicit


def mean_head_groups(teacher: Tensor, n_student_heads: int) -> Tensor:
    """`[batch, T, q, k]` -> `[batch, S, q, k]`: student head s gets the mean of teacher heads s*T/S .. (s+1)*T/S - 1."""
    batch, n_teacher_heads, q, k = teacher.shape
    if n_student_heads < 1 or n_teacher_heads % n_student_heads:
        raise ConfigError("distill.head_map", "mean", f"a teacher head count ({n_teacher_heads}) that is a multiple "
                          f"of the student's ({n_student_heads}); use relation heads otherwise")
    return teacher.view(batch, n_student_heads, n_teacher_heads // n_student_heads, q, k).mean(2)


def relation_heads(per_head: Tensor, n_relations: int, attention_mask: Tensor) -> Tensor:
    """MiniLMv2 relations: `per_head [batch, pos, head_index, d_head]` -> `[batch, n_relations, seq, seq]`.

    The heads' vectors are concatenated (`[batch, seq, head * d_head]`) and re-split into
    `n_relations` chunks of width head * d_head / n_relations; each relation is the softmax over
    real keys of X_r X_r^T / sqrt(width).
    """
    batch, seq, n_heads, d_head = per_head.shape
    total = n_heads * d_head
    if n_relations < 1 or total % n_relations:
        raise ConfigError("distill.relation_heads", n_relations, f"a divisor of the total width {total}")
    width = total // n_relations
    split = per_head.reshape(batch, seq, n_relations, width).transpose(1, 2)
    scores = split @ split.transpose(-2, -1) / math.sqrt(width)
    keys = attention_mask.bool()[:, None, None, :]
    return scores.masked_fill(~keys, torch.finfo(scores.dtype).min).softmax(-1)
