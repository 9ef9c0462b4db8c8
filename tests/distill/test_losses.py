"""Distillation losses: known values, zero at identity, monotone in a known perturbation, masks obeyed."""

from __future__ import annotations

import math

import pytest
import torch

from headlab.distill import attention_kl, score_mse, value_relation


def _maps(batch=2, heads=3, seq=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(batch, seq, dtype=torch.bool)
    mask[1, 4:] = False  # the second sequence has 4 real tokens
    scores = torch.randn(batch, heads, seq, seq, generator=g, dtype=torch.float64)
    maps = scores.masked_fill(~mask[:, None, None, :], float("-inf")).softmax(-1)
    return maps, scores, mask


def _uniform_like(maps, mask):
    keys = mask[:, None, None, :].to(maps.dtype)
    return keys / keys.sum(-1, keepdim=True) * torch.ones_like(maps)


def test_kl_is_zero_for_identical_maps_and_grows_with_the_mixing_weight():
    teacher, _, mask = _maps()
    assert attention_kl(teacher, teacher, mask).item() == pytest.approx(0.0, abs=1e-12)
    uniform = _uniform_like(teacher, mask)
    losses = [attention_kl(teacher, (1 - eps) * teacher + eps * uniform, mask).item() for eps in (0.0, 0.1, 0.3, 0.6, 0.9)]
    assert losses[0] == pytest.approx(0.0, abs=1e-12)
    assert all(a < b for a, b in zip(losses, losses[1:])), losses


def test_kl_of_one_hot_against_uniform_is_log_n_per_query():
    seq = 5
    mask = torch.ones(1, seq, dtype=torch.bool)
    teacher = torch.eye(seq, dtype=torch.float64)[None, None]
    student = torch.full_like(teacher, 1 / seq)
    assert attention_kl(teacher, student, mask).item() == pytest.approx(math.log(seq))


def test_kl_ignores_padded_queries_and_keys():
    teacher, _, mask = _maps()
    student = _maps(seed=1)[0]
    reference = attention_kl(teacher, student, mask)
    # padded query rows and padded key columns of sequence 1: junk in the student changes nothing
    junk = student.clone()
    junk[1, :, 4:, :] = 0.5
    assert attention_kl(teacher, junk, mask).item() == pytest.approx(reference.item())
    # and it equals the mean over the real queries of each sequence computed one by one
    per_query = []
    for b, n in ((0, 6), (1, 4)):
        t, s = teacher[b, :, :n, :n], student[b, :, :n, :n]
        per_query.append((t * (t.log() - s.log())).sum(-1).reshape(-1))
    assert reference.item() == pytest.approx(torch.cat(per_query).mean().item())


def test_score_mse_ignores_masked_positions():
    _, teacher_scores, mask = _maps()
    student_scores = teacher_scores + 0.5  # every real cell off by exactly 0.5
    real = (mask[:, :, None] & mask[:, None, :])[:, None].expand_as(student_scores)
    student_scores = torch.where(real, student_scores, torch.tensor(-1e9, dtype=torch.float64))
    assert score_mse(teacher_scores, student_scores, mask).item() == pytest.approx(0.25)
    assert score_mse(teacher_scores, teacher_scores, mask).item() == 0.0


def test_value_relation_is_a_distribution_over_real_keys():
    values = torch.randn(2, 3, 6, 4, dtype=torch.float64)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    rel = value_relation(values, mask)
    assert rel.shape == (2, 3, 6, 6)
    torch.testing.assert_close(rel.sum(-1), torch.ones(2, 3, 6, dtype=torch.float64))
    assert rel[1, :, :, 4:].abs().max() == 0.0
    v = values[0, 0]  # by hand for one head
    torch.testing.assert_close(rel[0, 0], (v @ v.T / 2.0).softmax(-1))


def test_mismatched_shapes_say_what_to_do():
    teacher, _, mask = _maps(heads=4)
    with pytest.raises(ValueError, match="map heads first"):
        attention_kl(teacher, _maps(heads=2)[0], mask)
