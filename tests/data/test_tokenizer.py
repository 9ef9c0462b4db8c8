"""CharTokenizer: vocabulary order, encode/decode, [UNK], truncation, punctuation, save/load."""

from __future__ import annotations

import json
import pickle

import pytest

from headlab.data import CLS_ID, UNK_ID, CharTokenizer, is_punctuation
from headlab.errors import ConfigError, DataError


def test_fit_orders_by_frequency_then_codepoint():
    tok = CharTokenizer.fit(["bba", "ac", "a"])  # a:3 b:2 c:1 ; "d" absent
    assert tok.tokens == ("[PAD]", "[CLS]", "[UNK]", "a", "b", "c")
    tie = CharTokenizer.fit(["ba"])  # tie on count -> code point order
    assert tie.tokens[3:] == ("a", "b")


def test_min_freq_and_max_vocab():
    texts = ["aaab", "bc"]  # a:3 b:2 c:1
    assert CharTokenizer.fit(texts, min_freq=2).tokens[3:] == ("a", "b")
    assert CharTokenizer.fit(texts, max_vocab=4).tokens[3:] == ("a",)
    with pytest.raises(ConfigError, match="data.min_freq"):
        CharTokenizer.fit(texts, min_freq=0)


def test_encode_prepends_cls_and_maps_unknown_to_unk():
    tok = CharTokenizer.fit(["abc"])
    a, b = tok.token_to_id("a"), tok.token_to_id("b")
    assert tok.encode("abz", max_len=10) == [CLS_ID, a, b, UNK_ID]
    assert tok.decode(tok.encode("abz", max_len=10)) == "ab"  # [UNK] is skipped


def test_truncation_counts_cls():
    tok = CharTokenizer.fit(["abcdef"])
    assert len(tok.encode("abcdef", max_len=4)) == 4
    assert tok.decode(tok.encode("abcdef", max_len=4)) == "abc"
    assert len(tok.encode("abcdef", max_len=7)) == 7
    assert len(tok.encode("abcdef", max_len=100)) == 7


def test_round_trip_on_real_train_texts(zh_reviews):
    train = zh_reviews.texts[::5]
    tok = CharTokenizer.fit(train)
    short = [t for t in train if len(t) < 127]
    assert len(short) > 1000
    assert all(tok.decode(tok.encode(t, max_len=128)) == t for t in short)


def test_punctuation_ids_cover_cjk_and_ascii_but_not_letters():
    tok = CharTokenizer.fit(["你好，世界。Hello! 真的？（是）…"])
    punct = set(tok.punctuation_ids)
    for ch in "，。!？（）…":
        assert tok.token_to_id(ch) in punct, ch
    for ch in "你好Hello ":
        assert tok.token_to_id(ch) not in punct, ch
    assert not punct & {0, 1, 2}
    assert all(is_punctuation(ch) for ch in "，。！？、；：“”（）…")
    assert not any(is_punctuation(ch) for ch in "a中1 ")


def test_save_load_identical(tmp_path):
    tok = CharTokenizer.fit(["好的，hello!", "再见。"])
    path = tmp_path / "tok" / "tokenizer.json"
    tok.save(path)
    loaded = CharTokenizer.load(path)
    assert loaded == tok and loaded.tokens == tok.tokens
    assert loaded.punctuation_ids == tok.punctuation_ids
    assert loaded.encode("hello，再见", 20) == tok.encode("hello，再见", 20)
    assert json.loads(path.read_text(encoding="utf-8"))["tokens"][3:] == list(tok.tokens[3:])


@pytest.mark.parametrize(
    "content",
    [
        b"not json at all",
        pickle.dumps({"tokens": ["[PAD]", "[CLS]", "[UNK]", "a"]}),
        json.dumps({"tokens": ["[PAD]", "[CLS]", "[UNK]", "a"]}).encode(),  # no format tag
        json.dumps({"format": "headlab.char_tokenizer", "version": 1, "tokens": ["a", "b"]}).encode(),
        json.dumps({"format": "headlab.char_tokenizer", "version": 1, "tokens": ["[PAD]", "[CLS]", "[UNK]", "ab"]}).encode(),
    ],
)
def test_load_rejects_malformed_files(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(DataError, match="bad.json"):
        CharTokenizer.load(path)
