"""Fine-tuning drift per head: the pure measures against hand values and scipy, and a tiny BERT run."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon

from headlab.hf.drift import DriftSettings, pattern_js_sums, pretrained_importance, weight_drift
from headlab.model.attention import HeadWeights


def _weights(scale_q: float) -> HeadWeights:
    ones = torch.ones(2, 3, 4)
    return HeadWeights(W_Q=ones * scale_q, W_K=ones, W_V=ones, W_O=torch.ones(2, 4, 3), b_Q=torch.zeros(2, 4),
                       b_K=torch.zeros(2, 4), b_V=torch.zeros(2, 4), b_O=torch.zeros(3))


def test_weight_drift_is_the_relative_frobenius_distance_per_head():
    before, after = _weights(1.0), _weights(3.0)
    after.W_O[1] += 1.0  # head 1 also moves its W_O by 1 everywhere
    # head 0: ||dW_Q|| = 2 * sqrt(12); base = 4 * 12 entries of 1 -> sqrt(48 * 4 / 48) = 1
    expected = torch.tensor([np.sqrt(4 * 12 / 48), np.sqrt((4 * 12 + 12) / 48)])
    torch.testing.assert_close(weight_drift(before, after), expected.float())


def test_pattern_js_equals_scipy_on_the_smoothed_real_rows():
    g = torch.Generator().manual_seed(0)
    p = torch.rand(2, 3, 5, 5, generator=g).softmax(-1)
    q = torch.rand(2, 3, 5, 5, generator=g).softmax(-1)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    p[1, :, :, 3:] = 0  # padded keys hold no mass
    p[1] /= p[1].sum(-1, keepdim=True)
    q[1, :, :, 3:] = 0
    q[1] /= q[1].sum(-1, keepdim=True)
    total, n = pattern_js_sums(p, q, mask)
    assert int(n) == 8
    expected = np.zeros(3)
    for b, keys in ((0, 5), (1, 3)):
        for h in range(3):
            for i in range(keys):
                ps = 0.001 / keys + 0.999 * p[b, h, i, :keys].double().numpy()
                qs = 0.001 / keys + 0.999 * q[b, h, i, :keys].double().numpy()
                expected[h] += jensenshannon(ps, qs) ** 2  # scipy returns the distance, sqrt(JS) in nats
    np.testing.assert_allclose(total.numpy(), expected, atol=1e-10)
    same, _ = pattern_js_sums(p, p, mask)
    assert float(same.abs().max()) < 1e-12


@pytest.mark.slow
def test_a_tiny_bert_fine_tuned_through_lightning_drifts_as_a_plain_adamw_loop_would():
    """The LightningModule trains what a hand-written AdamW loop trains on the same batches (the tiny
    BERT has no dropout), every head is measured at 0, 2, 4, and importance is read before and after."""
    import copy

    import torch.nn.functional as F

    from headlab.hf import HFModel
    from headlab.hf.classifier import HFClassifier
    from headlab.hf.importance import encode_batches, stratified_split
    from headlab.hf.texts import load_labeled
    from headlab.hf.tiny import build_tiny, train_tokenizer
    from headlab.lit.hf_finetune import finetune_drift

    data = load_labeled("en_polarity", None, 0, 0)
    tok = train_tokenizer(data.texts, decoder=False, vocab_size=300)
    model = build_tiny("bert", tok, seed=0)
    settings = DriftSettings(steps=4, every=2, lr=1e-2, probe_size=8, max_len=24, batch_size=8, test_share=0.9)
    rows, importance = finetune_drift(model, tok, data, seed=1, settings=settings)
    steps = sorted({r["step"] for r in rows})
    assert steps == [0, 2, 4] and len(rows) == 3 * 2 * 4
    at0 = [r for r in rows if r["step"] == 0]
    assert all(r["weight_drift"] == 0 and abs(r["js_from_pretrained"]) < 1e-12 and not r["role_changed"] for r in at0)
    # the reference: the same split, seed and batches, AdamW by hand
    torch.manual_seed(1)
    train_idx, _ = stratified_split(data.labels, settings.test_share, 1)
    torch.manual_seed(1)
    ref = HFClassifier(HFModel(copy.deepcopy(model).train()), n_classes=2)
    start = [copy.deepcopy(b.attn.head_weights()) for b in ref.blocks]
    optimizer = torch.optim.AdamW(ref.parameters(), lr=settings.lr)
    generator = torch.Generator().manual_seed(1)
    for _ in range(settings.steps):
        pick = [train_idx[i] for i in torch.randperm(len(train_idx), generator=generator)[:8].tolist()]
        batch = encode_batches(tok, data, pick, 8, 24)[0]
        loss = F.cross_entropy(ref(batch["input_ids"], batch["attention_mask"]).logits, batch["labels"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    expected = torch.cat([weight_drift(s, b.attn.head_weights()) for s, b in zip(start, ref.blocks)])
    got = torch.tensor([r["weight_drift"] for r in sorted((r for r in rows if r["step"] == 4),
                                                          key=lambda r: (r["layer"], r["head"]))], dtype=torch.float64)
    assert float(expected.min()) > 0
    torch.testing.assert_close(got, expected.double(), rtol=1e-4, atol=1e-7)
    assert model.encoder.layer[0].attention.self.query.weight.grad is None  # the pretrained model is untouched
    # importance: before = the frozen pretrained encoder under a fitted linear probe, after = the fine-tuned model
    before = [r for r in importance if r["when"] == "before"]
    after = [r for r in importance if r["when"] == "after"]
    assert len(before) == len(after) == 2 * 4
    train_part, test_part = stratified_split(data.labels, settings.test_share, 1)
    again = pretrained_importance(model, 2, encode_batches(tok, data, train_part, 8, 24),
                                  encode_batches(tok, data, test_part, 8, 24), 1)
    assert [r["ablation_dloss"] for r in again] == pytest.approx([r["ablation_dloss"] for r in before], abs=1e-9)
    assert [r["ablation_dloss"] for r in after] != pytest.approx([r["ablation_dloss"] for r in before])
