"""HFEncoder: its named points hold exactly what the HF model computes; gates remove exactly one head."""

from __future__ import annotations

import copy

import pytest
import torch

from headlab.analysis import attention_metrics
from headlab.errors import ConfigError
from headlab.hf import HFEncoder
from headlab.hf.probe import punctuation_ids
from headlab.measure import capture_patterns, measure_probe


def test_captured_patterns_equal_output_attentions(minilm, batch):
    model, _ = minilm
    with torch.no_grad():
        raw = model(**batch, output_attentions=True).attentions
        patterns = capture_patterns(HFEncoder(model), batch["input_ids"], batch["attention_mask"].bool())
    assert len(patterns) == len(raw) == 6
    for ours, theirs in zip(patterns, raw):
        assert ours.shape == theirs.shape == (3, 12, batch["input_ids"].shape[1], batch["input_ids"].shape[1])
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)


def test_transformerlens_hooks_run_on_the_hf_encoder_with_its_names_and_layouts(minilm, batch):
    """The same hook a TransformerLens user writes for headlab's model: zero head 5 of layer 2 in place."""
    model, _ = minilm
    net = HFEncoder(model)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    seq = ids.shape[1]
    shapes: dict[str, tuple[int, ...]] = {}

    def zero_head_5(z, hook):
        shapes[hook.name] = tuple(z.shape)
        z[:, :, 5, :] = 0.0
        return z

    def read_pattern(pattern, hook):
        shapes[hook.name] = tuple(pattern.shape)

    with torch.no_grad():
        hooked = net.run_with_hooks(ids, mask, fwd_hooks=[("blocks.2.attn.hook_z", zero_head_5),
                                                          ("blocks.2.attn.hook_pattern", read_pattern)]).hidden
        net.set_head_gate(2, 5, 0.0)
        try:
            gated = net(ids, mask).hidden
        finally:  # the encoder's hook stays on the session's shared MiniLM: leave its gates open
            net.reset_head_gates()
    assert shapes == {"blocks.2.attn.hook_z": (3, seq, 12, 32), "blocks.2.attn.hook_pattern": (3, 12, seq, seq)}
    torch.testing.assert_close(hooked, gated, atol=0, rtol=0)
    assert not any(point._forward_hooks for point in net.hook_dict.values())


def test_head_metrics_equal_the_pure_functions_on_raw_attentions(minilm, batch):
    model, tokenizer = minilm
    ids, mask = batch["input_ids"], batch["attention_mask"].bool()
    cls = (ids == tokenizer.cls_token_id) & mask
    punct = torch.isin(ids, torch.tensor(sorted(punctuation_ids(tokenizer)))) & mask
    assert punct.sum() >= 5  # ",", ".", ".", "，", "。" are in the batch and in the vocabulary
    chunk = {"input_ids": ids, "attention_mask": mask, "cls_mask": cls, "punct_mask": punct}
    m = measure_probe(HFEncoder(model), [chunk], map_len=8, weight_metrics=False)
    with torch.no_grad():
        raw = model(**batch, output_attentions=True).attentions
    for layer, pattern in enumerate(raw):
        expected = attention_metrics(pattern, mask, cls_mask=cls, punct_mask=punct)
        for name, values in expected.items():
            torch.testing.assert_close(torch.as_tensor(m.head_metrics[layer][name]), values.double(), atol=1e-6, rtol=0)


def test_open_gates_leave_the_model_unchanged_and_a_closed_gate_equals_zeroing_its_o_proj_columns(minilm, batch):
    model, _ = minilm
    net = HFEncoder(model)
    with torch.no_grad():
        plain = model(**batch).last_hidden_state
        torch.testing.assert_close(net(batch["input_ids"], batch["attention_mask"]).hidden, plain, atol=0, rtol=0)
        gates = torch.ones(6, 12)
        gates[2, 5] = 0.0
        gated = net(batch["input_ids"], batch["attention_mask"], head_gates=gates).hidden
        reference = copy.deepcopy(model)  # independent: head 5's slice of layer 2's o_proj input columns set to 0
        reference.encoder.layer[2].attention.output.dense.weight[:, 5 * 32 : 6 * 32] = 0.0
        expected = reference(**batch).last_hidden_state
    torch.testing.assert_close(gated, expected, atol=1e-5, rtol=0)
    assert (gated - plain).abs().max() > 1e-3  # the head mattered, so the check above could fail
    net.set_head_gate(2, 5, 0.0)  # the buffer does the same as the argument
    with torch.no_grad():
        torch.testing.assert_close(net(batch["input_ids"], batch["attention_mask"]).hidden, gated, atol=0, rtol=0)
    net.reset_head_gates()


def test_gates_carry_gradient_per_head(minilm, batch):
    model, _ = minilm
    net = HFEncoder(model)
    gates = torch.ones(6, 12, requires_grad=True)
    net(batch["input_ids"], batch["attention_mask"], head_gates=gates).hidden[:, 0].pow(2).sum().backward()
    assert gates.grad is not None and gates.grad.shape == (6, 12)
    assert (gates.grad.abs() > 0).all()
    model.zero_grad(set_to_none=True)


def test_head_weights_are_views_of_the_projections(minilm):
    model, _ = minilm
    attn = HFEncoder(model).blocks[3].attn
    w = attn.head_weights()
    x = torch.randn(5, 384)
    sa = model.encoder.layer[3].attention.self
    q = sa.query(x) - sa.query.bias
    torch.testing.assert_close(x @ w.W_Q[7], q[:, 7 * 32 : 8 * 32], atol=1e-5, rtol=0)
    z = torch.randn(5, 32)
    dense = model.encoder.layer[3].attention.output.dense
    full = torch.zeros(5, 384)
    full[:, 7 * 32 : 8 * 32] = z
    torch.testing.assert_close(z @ w.W_O[7], dense(full) - dense.bias, atol=1e-5, rtol=0)
    assert w.W_K.shape == w.W_V.shape == (12, 384, 32) and w.W_O.shape == (12, 32, 384)


def test_a_model_without_attention_layers_is_a_config_error():
    from transformers import FNetConfig, FNetModel  # Fourier mixing: no attention at all

    tiny = FNetModel(FNetConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, intermediate_size=32))
    with pytest.raises(ConfigError, match="family headlab reads.*model_type=.fnet."):
        HFEncoder(tiny, "tiny-fnet")
