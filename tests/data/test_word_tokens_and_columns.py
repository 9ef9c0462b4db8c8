"""`data.tokenizer=word` and `data.files.text_column` / `label_column`: hand-computed vocabularies and ids,
the run's vocab.json read back as the right kind, and the datamodule on a CSV with other column names."""

from __future__ import annotations

import pytest

from headlab.data import TextDataModule
from headlab.data.files import load_file_splits, load_texts
from headlab.data.tokenizer import CharTokenizer, WordTokenizer, load_tokenizer, make_tokenizer
from headlab.errors import ConfigError, DataError


def test_word_vocabulary_order_ids_and_truncation():
    tok = WordTokenizer.fit(["the red cat.", "the blue cat", "a red dog!"])
    # counts: the 2, red 2, cat 2, then 1 each; ties in text order (code point): '!' < '.' < 'a' < 'blue' < 'dog'
    assert tok.tokens == ("[PAD]", "[CLS]", "[UNK]", "cat", "red", "the", "!", ".", "a", "blue", "dog")
    assert tok.encode("the red fox.", 10) == [1, 5, 4, 2, 7]  # fox unseen -> [UNK]; '.' its own token
    assert tok.encode("the red fox.", 3) == [1, 5, 4]
    assert tok.split("it's 3.5") == ["it", "'", "s", "3", ".", "5"]
    assert tok.punctuation_ids == (6, 7)
    assert tok.decode([1, 5, 4, 2, 3]) == "the red cat"
    assert WordTokenizer.fit(["a a b"], min_freq=2).tokens == ("[PAD]", "[CLS]", "[UNK]", "a")


def test_vocab_file_is_read_back_as_its_own_kind(tmp_path):
    word, char = WordTokenizer.fit(["red cat"]), CharTokenizer.fit(["red cat"])
    word.save(tmp_path / "w.json")
    char.save(tmp_path / "c.json")
    assert load_tokenizer(tmp_path / "w.json") == word and type(load_tokenizer(tmp_path / "w.json")) is WordTokenizer
    assert load_tokenizer(tmp_path / "c.json") == char and type(load_tokenizer(tmp_path / "c.json")) is CharTokenizer
    with pytest.raises(DataError, match="not a headlab tokenizer"):
        CharTokenizer.load(tmp_path / "w.json")
    with pytest.raises(ConfigError, match=r"data.tokenizer='bpe': expected one of \['char', 'word'\] or a Hugging Face"):
        make_tokenizer("bpe", ["x"])


CSV = "sentence,category\n" + "".join(f"the {c} one is {lab},{lab}\n" for c in ("red", "blue") for lab in ("cat", "dog") for _ in range(6))


def test_column_names_are_configurable_and_a_missing_one_says_how(write_file):
    path = write_file("mine.csv", CSV)
    parts = load_file_splits(path, text_column="sentence", label_column="category")
    assert parts["train"].label_names == ["cat", "dog"] and parts["train"].texts[0] == "the red one is cat"
    assert load_texts(path, "sentence")[0] == "the red one is cat"
    with pytest.raises(DataError, match=r"missing column 'text' \(columns found: \['sentence', 'category'\]\); name yours "
                                        r"with data.files.text_column=NAME"):
        load_file_splits(path)
    with pytest.raises(ConfigError, match="data.files.label_column='sentence': expected a column other than"):
        load_file_splits(path, text_column="sentence", label_column="sentence")


def test_datamodule_with_word_tokens_and_other_columns(write_file):
    path = write_file("mine.csv", CSV)
    dm = TextDataModule("files", max_len=4, files={"train": str(path), "text_column": "sentence", "label_column": "category"},
                        tokenizer="word", probe_size=2, val_fraction=0.25, test_fraction=0.25)
    dm.setup()
    assert set(dm.tokenizer.tokens[3:]) == {"the", "one", "is", "red", "blue", "cat", "dog"}
    stats = dm.stats
    # every text is 5 words: [CLS] + 5 > max_len 4, so every row is truncated (by words, not characters)
    assert stats["truncated_train"] == stats["n_train"] == 12 and stats["tokenizer"] == "word"
    assert stats["label_names"] == ["cat", "dog"] and stats["files"]["train"] == str(path)
    with pytest.raises(ConfigError, match="data.tokenizer='chars'"):
        TextDataModule("files", files={"train": str(path)}, tokenizer="chars")
