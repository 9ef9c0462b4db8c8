"""Every family behind HFModel, on tiny random models built from its HF config (nothing downloads):
patterns equal `output_attentions`, a closed gate equals zeroing that head's output-projection inputs,
per-head weights reproduce the family's own projections, and a decoder's induction score is the
stripe of its own attention."""

from __future__ import annotations

import copy

import pytest
import torch

from headlab.hf import HFModel
from headlab.hf.analyze import repeated_tokens
from headlab.hf.tiny import TINY_FAMILIES, build_tiny, train_tokenizer
from headlab.measure import capture_patterns
from headlab.measure.lm_probe import measure_lm_probe

TEXTS = ["The film is slow, but the ending works. I liked it.", "A plain sentence; short.", "ok then",
         "Markets fell sharply on Monday as investors weighed the news."] * 8
DECODERS = ("gpt2", "gpt_neox", "llama")


@pytest.fixture(scope="module")
def tokenizers():
    return {True: train_tokenizer(TEXTS, decoder=True, vocab_size=300), False: train_tokenizer(TEXTS, decoder=False, vocab_size=300)}


def _model(family, tokenizers, seed=0):
    tok = tokenizers[family in DECODERS]
    return build_tiny(family, tok, seed=seed), tok


def _batch(tok):
    return tok(TEXTS[:3], padding=True, return_tensors="pt")


def _final(out):
    return out.logits if getattr(out, "logits", None) is not None else out.last_hidden_state


@pytest.mark.parametrize("family", TINY_FAMILIES)
def test_patterns_equal_output_attentions(family, tokenizers):
    model, tok = _model(family, tokenizers)
    batch = _batch(tok)
    net = HFModel(model)
    assert net.family.name == family and net.is_decoder == (family in DECODERS)
    with torch.no_grad():
        raw = model(**batch, output_attentions=True).attentions
        ours = capture_patterns(net, batch["input_ids"], batch["attention_mask"].bool())
        out = net(batch["input_ids"], batch["attention_mask"], return_patterns=True)
    assert len(ours) == len(raw) == 2 and len(out.patterns) == 2
    for a, b, c in zip(ours, raw, out.patterns):
        assert a.shape == (3, 4, batch["input_ids"].shape[1], batch["input_ids"].shape[1])
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
        torch.testing.assert_close(c, b, atol=1e-6, rtol=0)


def _zero_head_inputs(model, family, layer, head, d_head):
    """Independent of HFModel: set head `head`'s input columns of layer `layer`'s output projection to 0."""
    cols = slice(head * d_head, (head + 1) * d_head)
    base = model.base_model
    with torch.no_grad():
        if family == "gpt2":
            base.h[layer].attn.c_proj.weight[cols, :] = 0.0  # Conv1D: [in, out]
            return
        proj = {"bert": lambda: base.encoder.layer[layer].attention.output.dense,
                "roberta": lambda: base.encoder.layer[layer].attention.output.dense,
                "electra": lambda: base.encoder.layer[layer].attention.output.dense,
                "distilbert": lambda: base.transformer.layer[layer].attention.out_lin,
                "gpt_neox": lambda: base.layers[layer].attention.dense,
                "llama": lambda: base.layers[layer].self_attn.o_proj}[family]()
        proj.weight[:, cols] = 0.0


@pytest.mark.parametrize("family", TINY_FAMILIES)
def test_a_closed_gate_equals_zeroing_the_heads_output_projection_inputs(family, tokenizers):
    model, tok = _model(family, tokenizers)
    batch = _batch(tok)
    net = HFModel(model)
    gates = torch.ones(2, 4)
    gates[1, 2] = 0.0
    with torch.no_grad():
        plain = _final(model(**batch))
        torch.testing.assert_close(_final_net(net, batch), plain, atol=0, rtol=0)  # open gates change nothing
        gated = _final_net(net, batch, gates)
        reference = copy.deepcopy(model)
        _zero_head_inputs(reference, family, 1, 2, net.blocks[1].attn.d_head)
        expected = _final(reference(**batch))
    torch.testing.assert_close(gated, expected, atol=1e-5, rtol=0)
    assert (gated - plain).abs().max() > 1e-4  # the head mattered: the check above could fail


def _final_net(net, batch, gates=None):
    out = net(batch["input_ids"], batch["attention_mask"], head_gates=gates)
    return out.logits if out.logits is not None else out.hidden


def _queries(model, family, layer, x):
    """The family's own query projection of `x` `[n, d_model]`, `[n, head, d_head]`, computed from its modules."""
    base = model.base_model
    if family in ("bert", "roberta", "electra"):
        q = base.encoder.layer[layer].attention.self.query(x)
    elif family == "distilbert":
        q = base.transformer.layer[layer].attention.q_lin(x)
    elif family == "gpt2":
        q = base.h[layer].attn.c_attn(x)[:, : x.shape[1]]
    elif family == "gpt_neox":
        return base.layers[layer].attention.query_key_value(x).view(x.shape[0], 4, 3, -1)[:, :, 0]
    else:
        q = base.layers[layer].self_attn.q_proj(x)
    return q.view(x.shape[0], 4, -1)


@pytest.mark.parametrize("family", TINY_FAMILIES)
def test_head_weights_reproduce_the_familys_projections(family, tokenizers):
    model, _ = _model(family, tokenizers)
    net = HFModel(model)
    attn = net.blocks[1].attn
    w = attn.head_weights()
    d_model = w.W_Q.shape[1]
    assert w.W_Q.shape == w.W_K.shape == w.W_V.shape == (4, d_model, 8) and w.W_O.shape == (4, 8, d_model)
    x = torch.randn(5, d_model)
    with torch.no_grad():
        expected = _queries(model, family, 1, x)
        ours = torch.einsum("nd,hde->nhe", x, w.W_Q) + w.b_Q
        torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)
        z = torch.randn(5, 8)  # head 3's context alone through the output projection
        full = torch.zeros(5, 32)
        full[:, 24:32] = z
        proj = attn._parts.out_proj
        direct = full @ (proj.weight if family == "gpt2" else proj.weight.T)  # Conv1D: x @ W; Linear: x @ W^T
        torch.testing.assert_close(z @ w.W_O[3], direct, atol=1e-5, rtol=0)


def test_llama_grouped_keys_are_repeated_per_query_head(tokenizers):
    model, _ = _model("llama", tokenizers)
    w = HFModel(model).blocks[0].attn.head_weights()
    assert model.config.num_key_value_heads == 2
    torch.testing.assert_close(w.W_K[0], w.W_K[1], atol=0, rtol=0)  # heads 0, 1 read K/V head 0
    assert not torch.equal(w.W_K[1], w.W_K[2])
    k = model.model.layers[0].self_attn.k_proj.weight  # [2 * 8, 32]
    torch.testing.assert_close(w.W_K[2], k[8:16].T, atol=0, rtol=0)


@pytest.mark.parametrize("family", DECODERS)
def test_decoder_induction_score_is_the_stripe_of_its_own_attention(family, tokenizers):
    model, tok = _model(family, tokenizers)
    net = HFModel(model)
    half = 6
    rep = repeated_tokens(tok, 5, half, seed=1)
    assert rep.shape == (5, 13) and torch.equal(rep[:, 1:7], rep[:, 7:]) and (rep[:, 0] == tok.bos_token_id).all()
    m = measure_lm_probe(net, rep, half, 2, repeated=rep)
    with torch.no_grad():
        raw = model(input_ids=rep, output_attentions=True).attentions
    for layer, a in enumerate(raw):
        q = torch.arange(half + 1, 2 * half + 1)
        expected = a[:, :, q, q - half + 1].double().mean(-1).mean(0)  # the token after the earlier copy
        torch.testing.assert_close(m.per_layer[layer]["rep_induction_score"], expected, atol=1e-6, rtol=0)
        prev = a[:, :, torch.arange(2, 13), torch.arange(1, 12)]  # TL's previous-token score, BOS and diagonal out
        masked = a.double().clone()
        masked[..., 0] = 0
        masked.diagonal(dim1=-2, dim2=-1).zero_()
        expected_prev = (prev.double().sum(-1) / masked.sum((-2, -1))).mean(0)
        torch.testing.assert_close(m.per_layer[layer]["prev_token_score"].double(), expected_prev, atol=1e-6, rtol=0)
