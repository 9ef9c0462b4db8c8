"""`data.tokenizer=PATH/tokenizer.json`: a Hugging Face tokenizer as the splitter of a classifier's data.
The vocabulary is its subwords on the train texts (checked against the library's own split), it is
saved inside vocab.json as JSON and read back, and a bad file is one line."""

from __future__ import annotations

import json

import pytest

from headlab.data import TextDataModule
from headlab.data.tokenizer import CLS_ID, UNK_ID, HFTokenizer, load_tokenizer, make_tokenizer
from headlab.errors import ConfigError, DataError

tokenizers = pytest.importorskip("tokenizers")

TEXTS = ["the red cat sat", "the blue cat ran", "a red dog sat", "the reddish dog ran"] * 3


@pytest.fixture
def wordpiece(tmp_path):
    """A tiny WordPiece tokenizer trained here (no download), saved as a hub folder's tokenizer.json."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(TEXTS, trainers.WordPieceTrainer(vocab_size=40, special_tokens=["[UNK]"]))
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path, tok


def test_the_vocabulary_is_the_libraries_subwords_on_the_train_texts(wordpiece, tmp_path):
    path, hf = wordpiece
    tok = make_tokenizer(str(path), TEXTS)
    assert isinstance(tok, HFTokenizer) and tok.tokens[:3] == ("[PAD]", "[CLS]", "[UNK]")
    seen = {t for text in TEXTS for t in hf.encode(text, add_special_tokens=False).tokens}
    assert set(tok.tokens[3:]) == seen
    pieces = hf.encode("the reddish cat", add_special_tokens=False).tokens
    assert tok.encode("the reddish cat", 16) == [CLS_ID] + [tok.token_to_id(p) for p in pieces]
    assert UNK_ID not in tok.encode("the reddish cat", 16)
    tok.save(tmp_path / "vocab.json")
    back = load_tokenizer(tmp_path / "vocab.json")
    assert type(back) is HFTokenizer and back == tok and back.split("a blue dog") == tok.split("a blue dog")
    assert json.loads((tmp_path / "vocab.json").read_text())["hf_tokenizer"]["model"]["type"] == "WordPiece"


def test_a_datamodule_with_a_tokenizer_file_and_bad_files_are_one_line(wordpiece, write_file, tmp_path):
    path, _ = wordpiece
    csv = write_file("mine.csv", "text,label\n" + "".join(f"{t},{t.split()[1]}\n" for t in TEXTS))
    dm = TextDataModule("files", max_len=8, files={"train": str(csv)}, tokenizer=str(path), probe_size=2,
                        val_fraction=0.25, test_fraction=0.25)
    dm.setup()
    assert type(dm.tokenizer) is HFTokenizer and dm.stats["tokenizer"] == str(path)
    bad = tmp_path / "other.json"
    bad.write_text('{"not": "a tokenizer"}')
    with pytest.raises(DataError, match="not a Hugging Face tokenizer.json"):
        make_tokenizer(str(bad), TEXTS)
    with pytest.raises(ConfigError, match="data.tokenizer=.*missing.json.*expected a readable tokenizer.json"):
        make_tokenizer(str(tmp_path / "missing.json"), TEXTS)
    with pytest.raises(ConfigError, match="data.tokenizer='bpe'"):
        TextDataModule("files", files={"train": str(csv)}, tokenizer="bpe")


def test_a_run_trained_with_a_relative_tokenizer_file_predicts_from_elsewhere(wordpiece, tmp_path, monkeypatch, one_thread):
    """The tokenizer.json path is recorded absolute (like the data files), and vocab.json carries the
    tokenizer itself, so a new text is tokenised as in training from any directory."""
    from omegaconf import OmegaConf

    from headlab.reload import predict
    from tests._runs import compose_train_config, train_keeping_threads
    from tests.reload.test_travel import SMALL, write_csv

    path, _ = wordpiece
    start = tmp_path / "start"
    start.mkdir()
    (start / "tok.json").write_text(path.read_text())
    write_csv(start / "my.csv")
    monkeypatch.chdir(start)
    run = tmp_path / "run"
    train_keeping_threads(compose_train_config(run, [*SMALL, "data.tokenizer=tok.json"]))
    (segment,) = sorted(run.glob("segments/*/config.yaml"))  # the config this start saved
    assert OmegaConf.load(segment).data.tokenizer == str(start / "tok.json")
    monkeypatch.chdir(tmp_path)
    (out,) = predict(run, ["the red one is cat"])
    assert out.label in ("cat", "dog", "fox") and out.n_unknown == 0  # its subwords: all seen in training
    assert type(load_tokenizer(run / "vocab.json")) is HFTokenizer
