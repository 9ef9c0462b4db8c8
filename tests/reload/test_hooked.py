"""An LM handed to TransformerLens computes what headlab's network computes: the same logits for every
position encoding / LayerNorm / MLP variant, and TransformerLens' own `detect_head` on the hooked model
gives the scores headlab's `lm_pattern_scores` gives on the same tokens."""

from __future__ import annotations

import pytest
import torch

tl = pytest.importorskip("transformer_lens", reason="transformer_lens not installed: pip install -e '.[tl]'")

from transformer_lens.head_detector import detect_head  # noqa: E402

from headlab.analysis.lm_heads import lm_pattern_scores  # noqa: E402
from headlab.data.repeat_tokens import induction_probe  # noqa: E402
from headlab.errors import HeadlabError  # noqa: E402
from headlab.model import HeadlabClassifier, ModelConfig  # noqa: E402
from headlab.model.lm import HeadlabLM, LMConfig  # noqa: E402
from headlab.reload.hooked import to_hooked_transformer  # noqa: E402

VOCAB = 13

VARIANTS = {
    "learned+LN (experiment=induction)": {},
    "sinusoidal, no LN": {"pos_encoding": "sinusoidal", "layer_norm": False},
    "none, tied unembed": {"pos_encoding": "none", "tied_unembed": True},
    "rope": {"pos_encoding": "rope"},
    "alibi, 3 heads of 8": {"pos_encoding": "alibi", "n_heads": 3, "d_head": 8},
    "with MLP": {"attn_only": False, "d_ff": 40},
}


def _perturbed_lm(seed: int, **fields) -> HeadlabLM:
    """A random LM whose every parameter (LayerNorm gains, biases included) is moved off its init, so a
    weight left unmapped or mapped to the wrong place changes the logits."""
    torch.manual_seed(seed)
    net = HeadlabLM(LMConfig(**{"vocab_size": VOCAB, "max_len": 16, "d_model": 24, "n_heads": 4, **fields}))
    with torch.no_grad():
        for param in net.parameters():
            param.add_(0.2 * torch.randn_like(param))
    return net.eval()


@pytest.mark.parametrize("fields", list(VARIANTS.values()), ids=list(VARIANTS))
def test_logits_equal_the_headlab_network(fields):
    net = _perturbed_lm(0, **fields)
    model = to_hooked_transformer(net)
    tokens = torch.randint(0, VOCAB, (4, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours, theirs = net(tokens).logits, model(tokens)
    assert ours.abs().max() > 1.0  # not a trivially flat output
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=1e-5)


def test_detect_head_on_the_hooked_model_equals_headlabs_scores():
    net = _perturbed_lm(0, max_len=24)
    probe = induction_probe(16, VOCAB, 6, torch.Generator().manual_seed(2), max_gap=4)  # [16, 1 + 4 + 12] < n_ctx
    model = to_hooked_transformer(net)
    rows = {str(i): row[None] for i, row in enumerate(probe)}
    model.to_tokens = lambda seq, **_: rows[seq]  # no tokenizer: each "text" names one probe row
    with torch.no_grad():
        patterns = net(probe, return_patterns=True).patterns
    ours = [lm_pattern_scores(pattern, probe) for pattern in patterns]
    for name, detector in (("prev_token_score", "previous_token_head"), ("duplicate_score", "duplicate_token_head"),
                           ("induction_score", "induction_head")):
        theirs = torch.stack([detect_head(model, key, detector, exclude_bos=True, exclude_current_token=True)
                              for key in rows]).mean(0)  # [layer, head], the mean over the probe as detect_head's own
        torch.testing.assert_close(torch.stack([layer[name] for layer in ours]).float(), theirs, atol=1e-5, rtol=1e-5)
    spread = torch.cat([layer["prev_token_score"] for layer in ours])
    assert spread.max() - spread.min() > 0.05  # heads differ, so a head mapped to the wrong place would show


def test_a_classifier_is_refused_in_one_line():
    net = HeadlabClassifier(ModelConfig(vocab_size=8, n_classes=2, max_len=8, d_model=8, n_heads=2))
    with pytest.raises(HeadlabError, match="HeadlabClassifier is not a causal language model"):
        to_hooked_transformer(net)


def test_a_folder_without_checkpoints_is_refused_in_one_line(tmp_path):
    with pytest.raises(HeadlabError, match="has no checkpoints/last.ckpt"):
        to_hooked_transformer(tmp_path)
