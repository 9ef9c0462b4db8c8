"""One step's distillation terms on hand-built tensors with known values."""

from __future__ import annotations

import math

import pytest
import torch

from headlab.distill.transfer import attention_transfer, check_head_map, logit_kd, points_needed
from headlab.errors import ConfigError


def test_logit_kd_is_zero_for_equal_logits_and_matches_the_formula():
    t = torch.tensor([[2.0, 0.0], [0.0, 1.0]])
    assert logit_kd(t, t, 2.0).item() == pytest.approx(0.0, abs=1e-7)
    s = torch.zeros(2, 2)  # uniform student: KL(p || u) = sum p log p + log 2, scaled by T^2
    T = 2.0
    p = torch.softmax(t / T, -1)
    expected = (T * T) * ((p * p.log()).sum(-1) + math.log(2)).mean().item()
    assert logit_kd(t, s, T).item() == pytest.approx(expected, rel=1e-6)


def test_points_follow_the_loss_and_head_map():
    assert points_needed("kl", "mean") == ("hook_pattern",)
    assert points_needed("mse", "mean") == ("hook_attn_scores",)
    assert points_needed("kl", "relation") == ("hook_q", "hook_k", "hook_v")


def _patterns(batch: int, heads: int, seq: int, seed: int) -> torch.Tensor:
    return torch.randn(batch, heads, seq, seq, generator=torch.Generator().manual_seed(seed)).softmax(-1)


def test_kl_transfer_averages_teacher_head_groups_and_layer_pairs():
    mask = torch.ones(2, 5, dtype=torch.bool)
    teacher = {"hook_pattern": [_patterns(2, 4, 5, 0), _patterns(2, 4, 5, 1)]}
    # student layer 0 = the mean of teacher layer 1's head pairs (0, 1) and (2, 3): KL 0 there
    exact = teacher["hook_pattern"][1].view(2, 2, 2, 5, 5).mean(2)
    student = {"hook_pattern": [exact, torch.full((2, 2, 5, 5), 0.2)]}
    assert attention_transfer(teacher, student, mask, [(0, 1)], "kl", "mean").item() == pytest.approx(0.0, abs=1e-6)
    both = attention_transfer(teacher, student, mask, [(0, 1), (1, 1)], "kl", "mean").item()
    uniform_kl = (exact * (exact.log() - math.log(0.2))).sum(-1).mean().item()
    assert both == pytest.approx(uniform_kl / 2, rel=1e-5)  # mean over the two pairs


def test_mse_transfer_skips_masked_cells():
    mask = torch.tensor([[True, True, False]])
    t = torch.zeros(1, 1, 3, 3)
    s = torch.zeros(1, 1, 3, 3)
    s[..., 2] = 1e9  # masked keys: must not count
    s[0, 0, 0, 0] = 2.0
    assert attention_transfer({"hook_attn_scores": [t]}, {"hook_attn_scores": [s]}, mask, [(0, 0)], "mse",
                              "mean").item() == 1.0


def test_relation_transfer_is_zero_for_the_same_vectors_under_any_head_split():
    mask = torch.ones(1, 4, dtype=torch.bool)
    x = torch.randn(1, 4, 4, 8)  # [batch, pos, head_index, d_head]: 4 heads x 8 = width 32
    same = x.reshape(1, 4, 2, 16)  # the same vectors as 2 heads x 16
    teacher = {p: [x] for p in ("hook_q", "hook_k", "hook_v")}
    student = {p: [same] for p in ("hook_q", "hook_k", "hook_v")}
    assert attention_transfer(teacher, student, mask, [(0, 0)], "kl", "relation").item() == pytest.approx(0, abs=1e-6)
    other = {p: [torch.randn(1, 4, 2, 16)] for p in ("hook_q", "hook_k", "hook_v")}
    assert attention_transfer(teacher, other, mask, [(0, 0)], "kl", "relation").item() > 0.01


@pytest.mark.parametrize("args, key", [
    (("mean", "kl", 4, 3, 32, 36), "head_map"),      # 4 teacher heads cannot be averaged into 3
    (("relation", "mse", 4, 2, 32, 32), "head_map"),  # relations are distributions: KL only
    (("relation", "kl", 4, 3, 32, 36), "head_map"),   # 3 relation heads do not divide the teacher's width 32
    (("mean", "l2", 4, 2, 32, 32), "attention_loss"),
])
def test_bad_head_maps_are_config_errors(args, key):
    with pytest.raises(ConfigError, match=f"distill.{key}"):
        check_head_map(*args)
    check_head_map("relation", "kl", 4, 2, 32, 32)  # any counts whose widths split evenly
    check_head_map("mean", "mse", 4, 4, 32, 16)
