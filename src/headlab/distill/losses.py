"""Attention-transfer losses between a teacher's and a student's heads (pure tensor functions).

- `attention_kl`: MiniLM (Wang et al. 2020): KL(teacher || student) of each query's attention
  distribution, mean over heads and real queries. Padded keys hold 0 in both and are skipped.
- `score_mse`: TinyBERT (Jiao et al. 2020): MSE of pre-softmax scores over real (query, key)
  pairs only; masked cells hold -inf / finfo.min and would dominate any mean that kept them.
- `value_relation`: MiniLM's value relation softmax(V V^T / sqrt(d_head)), a `[batch, head, q, k]`
  distribution that `attention_kl` compares like an attention map.

Shapes: maps and scores `[batch, head, q, k]`; `attention_mask [batch, seq]` (True = real token).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

_EPS = 1e-12  # log(0) guard: a student that puts exactly 0 where the teacher puts mass is penalised hard, not NaN


def attention_kl(teacher: Tensor, student: Tensor, attention_mask: Tensor) -> Tensor:
    """Scalar KL(teacher || student), mean over heads and real queries (nats).

    >>> t = torch.tensor([[[[1.0, 0.0], [0.5, 0.5]]]])
    >>> attention_kl(t, t, torch.ones(1, 2, dtype=torch.bool)).item()
    0.0
    >>> s = torch.full((1, 1, 2, 2), 0.5)  # one-hot vs uniform over 2 keys: log 2 on query 0, 0 on query 1
    >>> round(attention_kl(t, s, torch.ones(1, 2, dtype=torch.bool)).item(), 6) == round(math.log(2) / 2, 6)
    True
    """
    _check_pair(teacher, student, attention_mask)
    keys = attention_mask.bool()[:, None, None, :]  # [batch, 1, 1, k]
    per_cell = torch.where(keys & (teacher > 0), teacher * (torch.log(teacher.clamp_min(_EPS))
                                                           - torch.log(student.clamp_min(_EPS))), 0.0)
    per_query = per_cell.sum(-1)  # [batch, head, q]
    return _mean_over_real_queries(per_query, attention_mask)


def score_mse(teacher_scores: Tensor, student_scores: Tensor, attention_mask: Tensor) -> Tensor:
    """Scalar mean squared error of scores over real (query, key) pairs and heads.

    >>> t, s = torch.zeros(1, 1, 2, 2), torch.tensor([[[[1.0, -1e9], [3.0, -1e9]]]])
    >>> score_mse(t, s, torch.tensor([[True, False]])).item()  # only cell (0, 0) is real: 1^2
    1.0
    """
    _check_pair(teacher_scores, student_scores, attention_mask)
    mask = attention_mask.bool()
    pairs = (mask[:, :, None] & mask[:, None, :])[:, None]  # [batch, 1, q, k]
    diff = torch.where(pairs, teacher_scores - student_scores, 0.0)
    n_cells = pairs.sum() * teacher_scores.shape[1]
    return diff.pow(2).sum() / n_cells.clamp_min(1)


def value_relation(values: Tensor, attention_mask: Tensor) -> Tensor:
    """`[batch, head, q, k]` softmax(V V^T / sqrt(d_head)) over real keys, from `values [batch, head, seq, d_head]`."""
    if values.dim() != 4:
        raise ValueError(f"expected values [batch, head, seq, d_head]; got {tuple(values.shape)}")
    scores = values @ values.transpose(-2, -1) / math.sqrt(values.shape[-1])
    keys = attention_mask.bool()[:, None, None, :]
    return scores.masked_fill(~keys, torch.finfo(scores.dtype).min).softmax(-1)


def _mean_over_real_queries(per_query: Tensor, attention_mask: Tensor) -> Tensor:
    queries = attention_mask.bool()[:, None, :].expand_as(per_query)
    return per_query[queries].mean() if queries.any() else per_query.sum() * 0.0


def _check_pair(teacher: Tensor, student: Tensor, attention_mask: Tensor) -> None:
    if teacher.shape != student.shape or teacher.dim() != 4:
        raise ValueError(f"teacher and student must both be [batch, head, q, k]; got {tuple(teacher.shape)} "
                         f"and {tuple(student.shape)} (map heads first: headlab.distill.maps)")
    if attention_mask.shape != (teacher.shape[0], teacher.shape[-1]) or teacher.shape[-2] != teacher.shape[-1]:
        raise ValueError(f"expected attention_mask [batch, seq] = {(teacher.shape[0], teacher.shape[-1])}; "
                         f"got {tuple(attention_mask.shape)}")
