"""One distillation step's loss terms from tensors: the logit term (KD) and the attention term.

Pure functions (tensors in, a scalar out). `points_needed` says which named points
(headlab.model.hooks) each attention loss reads; `attention_transfer` pairs the student's layers
with the teacher's (`layer_map`) and, when head counts differ, maps heads (`mean` of teacher head
groups, or MiniLMv2 `relation` heads over queries, keys and values).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from headlab.distill.losses import attention_kl, score_mse
from headlab.distill.maps import mean_head_groups, relation_heads
from headlab.errors import ConfigError

ATTENTION_LOSSES = ("kl", "mse")
HEAD_MAPS = ("mean", "relation")


def points_needed(attention_loss: str, head_map: str) -> tuple[str, ...]:
    """The named points an attention loss reads: patterns (kl), scores (mse), or Q, K, V (relation heads).

    Relation heads compare the queries and keys the scores are made of: in a RoPE layer the
    reader takes them after the rotation (`hook_rot_q`, `hook_rot_k`; see `forward_with_points`).
    """
    if head_map == "relation":
        return ("hook_q", "hook_k", "hook_v")
    return ("hook_pattern",) if attention_loss == "kl" else ("hook_attn_scores",)


def logit_kd(teacher_logits: Tensor, student_logits: Tensor, temperature: float) -> Tensor:
    """Hinton et al. 2015: T^2 * KL(softmax(t / T) || softmax(s / T)), mean over the batch.

    The T^2 keeps the gradient's scale independent of T, so alpha means the same at every temperature.
    """
    t = F.log_softmax(teacher_logits / temperature, dim=-1)
    s = F.log_softmax(student_logits / temperature, dim=-1)
    return F.kl_div(s, t, log_target=True, reduction="batchmean") * temperature ** 2


def attention_transfer(teacher: Mapping[str, Sequence[Tensor]], student: Mapping[str, Sequence[Tensor]],
                       attention_mask: Tensor, pairs: Sequence[tuple[int, int]], attention_loss: str,
                       head_map: str) -> Tensor:
    """Mean over `pairs` (student layer, teacher layer) of the attention loss between their heads.

    `teacher` / `student`: point name -> per-layer tensors, as `points_needed` names them.
    kl: KL(teacher || student) of patterns; mse: MSE of pre-softmax scores (masked cells skipped);
    relation: mean KL of the Q-Q, K-K and V-V relations, split into the student's head count.
    """
    if not pairs:
        raise ValueError("no student layer is paired with a teacher layer")
    total = attention_mask.new_zeros((), dtype=torch.float32)
    for s_layer, t_layer in pairs:
        if head_map == "relation":
            n = student["hook_q"][s_layer].shape[2]  # [batch, pos, head_index, d_head]
            terms = [attention_kl(relation_heads(teacher[p][t_layer], n, attention_mask),
                                  relation_heads(student[p][s_layer], n, attention_mask), attention_mask)
                     for p in ("hook_q", "hook_k", "hook_v")]
            total = total + sum(terms) / len(terms)
            continue
        point = "hook_pattern" if attention_loss == "kl" else "hook_attn_scores"
        s_map, t_map = student[point][s_layer], teacher[point][t_layer]
        if t_map.shape[1] != s_map.shape[1]:
            t_map = mean_head_groups(t_map, s_map.shape[1])
        total = total + (attention_kl(t_map, s_map, attention_mask) if attention_loss == "kl"
                         else score_mse(t_map, s_map, attention_mask))
    return total / len(pairs)


def check_head_map(head_map: str, attention_loss: str, teacher_heads: int, student_heads: int,
                   teacher_width: int, student_width: int) -> None:
    """Refuse, before any training step, a head map that cannot pair these models' heads."""
    if attention_loss not in ATTENTION_LOSSES:
        raise ConfigError("distill.attention_loss", attention_loss, f"one of {list(ATTENTION_LOSSES)}")
    if head_map not in HEAD_MAPS:
        raise ConfigError("distill.head_map", head_map, f"one of {list(HEAD_MAPS)}")
    if head_map == "relation":
        if attention_loss != "kl":
            raise ConfigError("distill.head_map", head_map, "mean with attention_loss=mse (relation heads are "
                              "distributions, compared by KL: use attention_loss=kl)")
        if teacher_width % student_heads or student_width % student_heads:
            raise ConfigError("distill.head_map", head_map, f"a student head count ({student_heads}) that divides "
                              f"both widths (teacher {teacher_width}, student {student_width})")
    elif teacher_heads != student_heads and teacher_heads % student_heads:
        raise ConfigError("distill.head_map", head_map, f"relation, or a teacher head count ({teacher_heads}) that "
                          f"is a multiple of the student's ({student_heads})")
