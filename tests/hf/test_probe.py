"""The probe under the model's own tokenizer: special tokens, punctuation, [UNK] rate, shipped texts."""

from __future__ import annotations

import pytest
import torch

from headlab.errors import ConfigError
from headlab.hf import encode_probe, load_texts, punctuation_ids


def test_punctuation_comes_from_the_vocabulary(minilm):
    _, tokenizer = minilm
    ids = punctuation_ids(tokenizer)
    vocab = tokenizer.get_vocab()
    assert {vocab[p] for p in (".", ",", "。", "，", "!", "?")} <= ids
    assert not {vocab[t] for t in ("[CLS]", "[SEP]", "[UNK]", "the", "a")} & ids


def test_unk_rate_counts_real_non_special_tokens(minilm):
    _, tokenizer = minilm
    # "good ." -> good . (no [UNK]); "好 好" -> [UNK] [UNK] under MiniLM's vocabulary
    probe = encode_probe(tokenizer, ["good .", "好 好"], size=10, max_len=16)
    assert probe.n_tokens == 4 and probe.unk_rate == pytest.approx(0.5)


def test_chunks_mark_cls_punctuation_and_end_with_sep(minilm):
    _, tokenizer = minilm
    probe = encode_probe(tokenizer, ["a b, c", "yes", "one two three four five six"], size=3, max_len=6)
    assert probe.n_truncated == 1 and max(len(s) for s in probe.input_ids) == 6
    chunks = probe.chunks(chunk_size=2)
    assert [c["input_ids"].shape for c in chunks] == [(1, 6), (2, 6)]  # longest first, as probe_chunks
    for chunk in chunks:
        ids, mask = chunk["input_ids"], chunk["attention_mask"]
        last = mask.sum(1) - 1
        assert (ids[:, 0] == tokenizer.cls_token_id).all()
        assert (ids[torch.arange(len(ids)), last] == tokenizer.sep_token_id).all()
        assert chunk["cls_mask"].sum() == len(ids)
    punct = torch.cat([c["punct_mask"][c["input_ids"] == tokenizer.convert_tokens_to_ids(",")] for c in chunks])
    assert punct.numel() == 1 and punct.all()


def test_probe_is_a_seeded_sample(minilm):
    _, tokenizer = minilm
    texts = [f"text number {i}" for i in range(50)]
    a, b = (encode_probe(tokenizer, texts, size=10, max_len=8, seed=3) for _ in range(2))
    c = encode_probe(tokenizer, texts, size=10, max_len=8, seed=4)
    assert a.input_ids == b.input_ids != c.input_ids
    with pytest.raises(ConfigError, match="data.probe_size"):
        encode_probe(tokenizer, texts, size=0, max_len=8)


def test_english_texts_ship_in_the_gensim_wheel():
    polarity, news = load_texts("en_polarity"), load_texts("en_news")
    assert len(polarity) == 200 and len(news) == 300
    assert not any(t.startswith("__label__") for t in polarity)
    assert polarity[0] == "simplistic , silly and tedious ."
    assert news[0].startswith("Hundreds of people have been forced to vacate their homes")


def test_files_give_their_text_column(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("text,label\nthe plot is thin .,neg\na warm film .,pos\n", encoding="utf-8")
    assert load_texts("files", str(path)) == ["the plot is thin .", "a warm film ."]


def test_synthetic_texts_keep_one_letter_per_token(minilm):
    _, tokenizer = minilm
    texts = load_texts("synthetic", synthetic_n=20)
    probe = encode_probe(tokenizer, texts, size=20, max_len=128)
    assert probe.unk_rate == 0.0
    assert sorted(len(s) for s in probe.input_ids) == sorted(len(t.split()) + 2 for t in texts)
