"""measure_probe: hand-computed metrics on a model outside headlab, and headlab's model end to end."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from headlab.data.probe import ProbeSet
from headlab.errors import ConfigError
from headlab.measure import (
    add_query_masks,
    grad_norms,
    measure_probe,
    probe_chunks,
    query_token_ids,
    snapshot_weights,
)
from headlab.model import HeadlabClassifier, ModelConfig

LENGTHS = (3, 5, 5, 8)


def _probe() -> ProbeSet:
    rng = np.random.default_rng(0)
    seqs = tuple((1,) + tuple(int(t) for t in rng.integers(3, 20, n - 1)) for n in LENGTHS)  # [CLS] = 1
    return ProbeSet(seqs, tuple(i % 2 for i in range(len(seqs))), punctuation_ids=(3,))


class _UniformAttention(nn.Module):
    """Only a named point: no projections, no head_weights() (like a model seen from outside)."""

    def __init__(self) -> None:
        super().__init__()
        self.hook_pattern = nn.Identity()


class _UniformModel(nn.Module):
    """Every head of every layer attends uniformly over the real keys: the contract, nothing more."""

    def __init__(self, n_layers: int = 2, n_heads: int = 3) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.blocks = nn.ModuleList(nn.Module() for _ in range(n_layers))
        for block in self.blocks:
            block.attn = _UniformAttention()

    def forward(self, input_ids, attention_mask, return_patterns=False):
        real = attention_mask.float()  # [batch, seq]
        batch, seq = real.shape
        pattern = (real / real.sum(-1, keepdim=True))[:, None, None, :].expand(batch, self.n_heads, seq, seq)
        for block in self.blocks:
            block.attn.hook_pattern(pattern)
        return pattern


def test_any_model_with_the_named_point_is_measured_by_hand_values():
    m = measure_probe(_UniformModel(), probe_chunks(_probe(), chunk_size=3), map_len=4, weight_metrics=False)
    queries = sum(LENGTHS)
    entropy = sum(n * math.log(n) for n in LENGTHS) / queries  # every real query: log(#real keys)
    for layer in range(2):
        metrics = m.head_metrics[layer]
        np.testing.assert_allclose(metrics["entropy"], [entropy] * 3, rtol=1e-6)
        np.testing.assert_allclose(metrics["entropy_norm"], [1.0] * 3, rtol=1e-6)
        np.testing.assert_allclose(metrics["confidence"], [len(LENGTHS) / queries] * 3, rtol=1e-6)  # sum_n n*(1/n)
        np.testing.assert_allclose(metrics["cls_attention"], [len(LENGTHS) / queries] * 3, rtol=1e-6)
        assert not {"dist_from_init", "grad_norm", "cum_grad_norm"} & set(metrics)
        assert "q_cosine" not in m.head_pairs[layer]
        np.testing.assert_allclose(m.head_pairs[layer]["js"], np.zeros((3, 3)), atol=1e-6)  # identical heads
        assert m.roles[layer] == ["broad"] * 3
    assert m.mean_patterns.shape == (2, 3, 4, 4)
    assert m.metric_names[:2] == ["entropy", "entropy_norm"]


def _net(seed: int = 0) -> HeadlabClassifier:
    torch.manual_seed(seed)
    return HeadlabClassifier(ModelConfig(vocab_size=20, n_classes=2, max_len=16, n_layers=2, n_heads=2, d_model=8))


def test_chunking_does_not_change_the_numbers_and_the_mode_is_restored():
    net = _net().train()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    small = measure_probe(net, probe_chunks(_probe(), 1), map_len=8)
    whole = measure_probe(net, probe_chunks(_probe(), 64), map_len=8)
    assert net.training and all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    for a, b in zip(small.head_metrics + small.head_pairs, whole.head_metrics + whole.head_pairs):
        assert a.keys() == b.keys()
        for name in a:
            np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert {"q_cosine", "qk_cosine", "q_subspace"} <= set(whole.head_pairs[0])


def test_dist_from_init_is_the_relative_change_of_the_heads_weights():
    net = _net()
    init = snapshot_weights(net)
    with torch.no_grad():  # double head 1's W_Q in layer 0: the change is exactly its W_Q
        net.blocks[0].attn.q_proj.weight[4:8] *= 2
    m = measure_probe(net, probe_chunks(_probe(), 4), init_weights=init, weight_metrics=False)
    w = {k: init[0][k][1] for k in ("W_Q", "W_K", "W_V", "W_O")}
    expected = w["W_Q"].norm() / torch.cat([t.flatten() for t in w.values()]).norm()
    np.testing.assert_allclose(m.head_metrics[0]["dist_from_init"], [0.0, expected.item()], rtol=1e-6)
    np.testing.assert_allclose(m.head_metrics[1]["dist_from_init"], [0.0, 0.0])
    assert "q_cosine" not in m.head_pairs[0]  # weight_metrics=False: no pair tables from weights


def test_grad_norms_are_each_heads_slices_of_the_projection_gradients():
    net = _net()
    ids = torch.randint(2, 20, (3, 6))
    net(ids, torch.ones(3, 6, dtype=torch.bool)).logits.square().sum().backward()
    got = grad_norms(net)
    assert got.shape == (2, 2)
    for layer, block in enumerate(net.blocks):
        attn = block.attn
        for head in range(2):
            rows = slice(4 * head, 4 * head + 4)  # d_head = 4
            parts = [p.weight.grad[rows] for p in (attn.q_proj, attn.k_proj, attn.v_proj)]
            parts.append(attn.out_proj.weight.grad[:, rows])
            expected = torch.cat([p.flatten() for p in parts]).norm()
            assert got[layer, head].item() == pytest.approx(expected.item(), rel=1e-6)
    m = measure_probe(net, probe_chunks(_probe(), 4), grad_norm=got, cum_grad_norm=2 * got)
    np.testing.assert_allclose(m.head_metrics[1]["cum_grad_norm"], 2 * got[1].double().numpy())


def test_query_masks_select_the_queries_at_a_token():
    class Tok:
        tokens = ("[PAD]", "[CLS]", "[UNK]", "a", "b")
        def token_to_id(self, t): return self.tokens.index(t)
    ids = query_token_ids(["a"], Tok())
    assert ids == {"a": 3}
    chunks = probe_chunks(_probe(), 8)
    add_query_masks(chunks, ids)
    assert torch.equal(chunks[0]["query_masks"]["a"], chunks[0]["input_ids"] == 3)
    with pytest.raises(ConfigError, match="callbacks.head_metrics.query_tokens"):
        query_token_ids(["zz"], Tok())
    with pytest.raises(ValueError, match="at least one probe chunk"):
        measure_probe(_net(), [])


def test_the_task_view_reads_the_cls_rows_only_by_hand_values():
    """Uniform attention: from [CLS] each sequence puts 1/n on [CLS]; the task role of every head is broad."""
    m = measure_probe(_UniformModel(n_layers=1, n_heads=2), probe_chunks(_probe(), 4), weight_metrics=False, decision="cls")
    expected = np.mean([1 / n for n in LENGTHS])
    np.testing.assert_allclose(m.head_metrics[0]["cls_attention@task"], [expected] * 2)
    np.testing.assert_allclose(m.head_metrics[0]["entropy_norm@task"], [1.0, 1.0])
    assert m.decision == "cls" and m.task_roles == [["broad", "broad"]]
    assert "role@task" not in measure_probe(_UniformModel(), probe_chunks(_probe(), 4), weight_metrics=False).head_metrics[0]
    with pytest.raises(ConfigError, match="decision='first'"):
        measure_probe(_UniformModel(), probe_chunks(_probe(), 4), decision="first")
    chunks = probe_chunks(_probe(), 4)
    add_query_masks(chunks, {"task": 3})
    with pytest.raises(ConfigError, match="tokens other than 'task'"):
        measure_probe(_UniformModel(), chunks, decision="mean")
