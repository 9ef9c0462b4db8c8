"""Layer and head maps on hand-built shapes."""

from __future__ import annotations

import pytest
import torch

from headlab.distill import layer_map, mean_head_groups, relation_heads
from headlab.errors import ConfigError


@pytest.mark.parametrize("kind, teacher, student, expected", [
    ("uniform", 12, 4, [2, 5, 8, 11]),
    ("uniform", 6, 6, [0, 1, 2, 3, 4, 5]),
    ("uniform", 6, 3, [1, 3, 5]),
    ("last", 6, 3, [None, None, 5]),
    ("first_middle", 12, 4, [0, 2, 3, 5]),
    ("first_middle", 6, 2, [0, 2]),
    ("first_middle", 6, 1, [2]),
    ([0, None, 4], 6, 3, [0, None, 4]),
])
def test_layer_maps(kind, teacher, student, expected):
    assert layer_map(kind, teacher, student) == expected


@pytest.mark.parametrize("kind", ["deepest", [0, 1], [0, 9, 1]])
def test_bad_layer_maps_are_config_errors(kind):
    with pytest.raises(ConfigError, match="distill.layer_map"):
        layer_map(kind, 6, 3)


def test_mean_head_groups_averages_consecutive_teacher_heads():
    teacher = torch.zeros(1, 6, 2, 2)
    for h in range(6):
        teacher[0, h] = torch.tensor([[1.0, 0.0], [0.0, 1.0]]) if h % 2 == 0 else torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    out = mean_head_groups(teacher, 3)
    assert out.shape == (1, 3, 2, 2)
    torch.testing.assert_close(out, torch.full((1, 3, 2, 2), 0.5))
    with pytest.raises(ConfigError, match="relation heads"):
        mean_head_groups(teacher, 4)


def test_relation_heads_resplit_12_teacher_heads_into_4_relations():
    batch, seq = 2, 7
    teacher_q = torch.randn(batch, seq, 12, 32, dtype=torch.float64)  # MiniLM: 12 heads x 32 (hook_q layout)
    student_q = torch.randn(batch, seq, 4, 16, dtype=torch.float64)   # a 4-head, d_head 16 student
    mask = torch.ones(batch, seq, dtype=torch.bool)
    mask[1, 5:] = False
    rel_t, rel_s = relation_heads(teacher_q, 4, mask), relation_heads(student_q, 4, mask)
    assert rel_t.shape == rel_s.shape == (batch, 4, seq, seq)
    torch.testing.assert_close(rel_t.sum(-1), torch.ones(batch, 4, seq, dtype=torch.float64))
    assert rel_t[1, :, :, 5:].abs().max() == 0.0
    # relation 0 of the teacher is heads 0-2 concatenated (3 x 32 = 96 dims), by hand
    x = teacher_q[0, :, :3].reshape(seq, 96)
    torch.testing.assert_close(rel_t[0, 0], (x @ x.T / 96 ** 0.5).softmax(-1))
    with pytest.raises(ConfigError, match="relation_heads"):
        relation_heads(teacher_q, 5, mask)
