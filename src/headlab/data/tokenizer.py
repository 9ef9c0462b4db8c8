"""Tokenizers: one token per Unicode code point (`CharTokenizer`, the default) or per word
(`WordTokenizer`, `data.tokenizer=word`), plus [PAD], [CLS] and [UNK] in both.

Characters by default, because the questions headlab asks are about where heads look, and a
character-level sequence keeps positions meaningful for Chinese text (no segmenter whose errors
would move the boundaries) and for the synthetic task (one letter = one position).
A word tokenizer is there for text in a language with spaces, where a question is about words
(the label is the last word, a keyword anywhere): words are runs of letters, digits and `_`
(`\\w+`), and every other non-space character is a token of its own, so punctuation keeps its
position. The vocabulary is a plain list saved as JSON (`vocab.json` of a run, with its kind), so
loading it never executes code; `load_tokenizer` reads either kind.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

from headlab.errors import ConfigError, DataError
from headlab.store import atomic_write_json

PAD, CLS, UNK = "[PAD]", "[CLS]", "[UNK]"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, CLS, UNK)
PAD_ID, CLS_ID, UNK_ID = 0, 1, 2
_FORMAT = "headlab.char_tokenizer"
_WORD_FORMAT = "headlab.word_tokenizer"
_HF_FORMAT = "headlab.hf_tokenizer"
_VERSION = 1
TOKENIZERS = ("char", "word")  # data.tokenizer (or the path of a Hugging Face tokenizer.json)
_WORD = re.compile(r"\w+|[^\w\s]")


def is_punctuation(char: str) -> bool:
    """Unicode category P* (covers ASCII and full-width CJK punctuation such as ，。！？“”（）…)."""
    return len(char) == 1 and unicodedata.category(char).startswith("P")


class CharTokenizer:
    """Maps characters to ids; ids 0, 1, 2 are [PAD], [CLS], [UNK] in every vocabulary."""

    _format = _FORMAT

    def __init__(self, tokens: Sequence[str]) -> None:
        tokens = tuple(tokens)
        _check_tokens(tokens, source=f"{type(self).__name__}(tokens)", words=self._format != _FORMAT)
        self._tokens = tokens
        self._index = {tok: i for i, tok in enumerate(tokens)}
        n_special = len(SPECIAL_TOKENS)
        self._punctuation_ids = tuple(i for i, tok in enumerate(tokens) if i >= n_special and is_punctuation(tok))

    @classmethod
    def fit(cls, texts: Iterable[str], min_freq: int = 1, max_vocab: int | None = None) -> "CharTokenizer":
        """Vocabulary of the characters seen at least `min_freq` times.

        Order is frequency descending, then code point, so the same texts always give the same
        ids. `max_vocab` caps the total size including the 3 special tokens.
        """
        if not isinstance(min_freq, int) or min_freq < 1:
            raise ConfigError("data.min_freq", min_freq, "an integer >= 1")
        if max_vocab is not None and (not isinstance(max_vocab, int) or max_vocab <= len(SPECIAL_TOKENS)):
            allowed = f"None or an integer > {len(SPECIAL_TOKENS)} (the size includes the special tokens)"
            raise ConfigError("max_vocab", max_vocab, allowed)
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(text)
        chars = sorted((c for c, n in counts.items() if n >= min_freq), key=lambda c: (-counts[c], ord(c)))
        if max_vocab is not None:
            chars = chars[: max_vocab - len(SPECIAL_TOKENS)]
        return cls(SPECIAL_TOKENS + tuple(chars))

    @property
    def tokens(self) -> tuple[str, ...]:
        return self._tokens

    @property
    def vocab_size(self) -> int:
        return len(self._tokens)

    @property
    def punctuation_ids(self) -> tuple[int, ...]:
        """Ids of punctuation characters, ascending (for the 'attention to punctuation' metric)."""
        return self._punctuation_ids

    def token_to_id(self, token: str) -> int:
        return self._index.get(token, UNK_ID)

    def split(self, text: str) -> list[str]:
        """The tokens of `text` before lookup: its characters."""
        return list(text)

    def encode(self, text: str, max_len: int) -> list[int]:
        """[CLS] followed by one id per character, truncated to `max_len` ids in total."""
        if not isinstance(max_len, int) or max_len < 1:
            raise ConfigError("max_len", max_len, "an integer >= 1")
        get = self._index.get
        return [CLS_ID] + [get(ch, UNK_ID) for ch in text[: max_len - 1]]

    def decode(self, ids: Iterable[int]) -> str:
        """Inverse of `encode` for in-vocabulary text; special ids (including [UNK]) are skipped."""
        n_special = len(SPECIAL_TOKENS)
        return "".join(self._tokens[i] for i in (int(j) for j in ids) if i >= n_special)

    def save(self, path: str | os.PathLike) -> None:
        atomic_write_json(path, {"format": self._format, "version": _VERSION, "tokens": list(self._tokens)})

    @classmethod
    def load(cls, path: str | os.PathLike) -> "CharTokenizer":
        """Read a vocabulary written by `save`; any other content raises DataError."""
        obj = _read_json(path)
        if not isinstance(obj, dict) or obj.get("format") != cls._format or obj.get("version") != _VERSION:
            raise DataError(path, f"not a headlab tokenizer (expected format={cls._format!r}, version={_VERSION})")
        tokens = obj.get("tokens")
        if not isinstance(tokens, list):
            raise DataError(path, "'tokens' must be a list of strings")
        _check_tokens(tuple(tokens), source=path, words=cls._format != _FORMAT)
        return cls(tokens)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._tokens == other._tokens

    def __hash__(self) -> int:
        return hash(self._tokens)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


class WordTokenizer(CharTokenizer):
    """Maps words (`\\w+`) and single punctuation marks to ids; ids 0, 1, 2 are [PAD], [CLS], [UNK].
    Case is kept ("Red" and "red" are two tokens): lower-case the texts first if case carries nothing."""

    _format = _WORD_FORMAT

    @classmethod
    def fit(cls, texts: Iterable[str], min_freq: int = 1, max_vocab: int | None = None) -> "WordTokenizer":
        """Vocabulary of the words seen at least `min_freq` times, frequency descending, then text order."""
        return cls(_vocabulary((_WORD.findall(text) for text in texts), min_freq, max_vocab))

    def split(self, text: str) -> list[str]:
        """The words and punctuation marks of `text`, in order (spaces dropped)."""
        return _WORD.findall(text)

    def encode(self, text: str, max_len: int) -> list[int]:
        """[CLS] followed by one id per word or mark, truncated to `max_len` ids in total."""
        if not isinstance(max_len, int) or max_len < 1:
            raise ConfigError("max_len", max_len, "an integer >= 1")
        get = self._index.get
        return [CLS_ID] + [get(w, UNK_ID) for w in self.split(text)[: max_len - 1]]

    def decode(self, ids: Iterable[int]) -> str:
        """The words of `ids` joined by spaces; special ids (including [UNK]) are skipped."""
        n_special = len(SPECIAL_TOKENS)
        return " ".join(self._tokens[i] for i in (int(j) for j in ids) if i >= n_special)

    def __repr__(self) -> str:
        return f"WordTokenizer(vocab_size={self.vocab_size})"


class HFTokenizer(WordTokenizer):
    """A Hugging Face `tokenizer.json` (BPE, WordPiece, Unigram) as the splitter: the vocabulary is the
    subword tokens it gives on the train texts (ids 0, 1, 2 stay [PAD], [CLS], [UNK]), so a model is
    sized to the user's data, not to the tokenizer's whole vocabulary. The tokenizer is kept inside
    vocab.json as JSON (the `tokenizers` library parses it; nothing in it runs)."""

    _format = _HF_FORMAT

    def __init__(self, tokens: Sequence[str], hf_json: str) -> None:
        self._hf_json, self._hf = hf_json, _hf_tokenizer(hf_json, "the tokenizer")
        super().__init__(tokens)

    @classmethod
    def fit(cls, texts: Iterable[str], min_freq: int = 1, max_vocab: int | None = None, hf_json: str = "") -> "HFTokenizer":
        """Vocabulary of the subword tokens seen at least `min_freq` times, frequency descending, then text order."""
        splitter = _hf_tokenizer(hf_json, "the tokenizer")
        pieces = (splitter.encode(text, add_special_tokens=False).tokens for text in texts)
        return cls(_vocabulary(pieces, min_freq, max_vocab), hf_json)

    def split(self, text: str) -> list[str]:
        """The subword tokens the Hugging Face tokenizer gives, without its own special tokens."""
        return self._hf.encode(text, add_special_tokens=False).tokens

    def decode(self, ids: Iterable[int]) -> str:
        """The text of `ids` as the Hugging Face tokenizer decodes its tokens; specials and [UNK] skipped."""
        n_special = len(SPECIAL_TOKENS)
        hf_ids = [self._hf.token_to_id(self._tokens[i]) for i in (int(j) for j in ids) if i >= n_special]
        return self._hf.decode([i for i in hf_ids if i is not None])

    def save(self, path: str | os.PathLike) -> None:
        atomic_write_json(path, {"format": self._format, "version": _VERSION, "tokens": list(self._tokens),
                                 "hf_tokenizer": json.loads(self._hf_json)})

    @classmethod
    def load(cls, path: str | os.PathLike) -> "HFTokenizer":
        obj = _read_json(path)
        if not isinstance(obj, dict) or obj.get("format") != cls._format or not isinstance(obj.get("tokens"), list) \
                or not isinstance(obj.get("hf_tokenizer"), dict):
            raise DataError(path, f"not a headlab tokenizer (expected format={cls._format!r} with tokens and hf_tokenizer)")
        return cls(obj["tokens"], json.dumps(obj["hf_tokenizer"]))

    def __repr__(self) -> str:
        return f"HFTokenizer(vocab_size={self.vocab_size})"


def _vocabulary(pieces: Iterable[list[str]], min_freq: int, max_vocab: int | None) -> tuple[str, ...]:
    """The special tokens, then the pieces (words or subwords, one list per text) seen at least
    `min_freq` times, frequency descending, then text order; at most `max_vocab` in all."""
    if not isinstance(min_freq, int) or min_freq < 1:
        raise ConfigError("data.min_freq", min_freq, "an integer >= 1")
    if max_vocab is not None and (not isinstance(max_vocab, int) or max_vocab <= len(SPECIAL_TOKENS)):
        raise ConfigError("max_vocab", max_vocab, f"None or an integer > {len(SPECIAL_TOKENS)} (the size includes the special tokens)")
    counts: Counter[str] = Counter()
    for part in pieces:
        counts.update(part)
    kept = sorted((t for t, n in counts.items() if n >= min_freq and t not in SPECIAL_TOKENS), key=lambda t: (-counts[t], t))
    return SPECIAL_TOKENS + tuple(kept[: None if max_vocab is None else max_vocab - len(SPECIAL_TOKENS)])


def is_hf_tokenizer_file(kind: object) -> bool:
    """`data.tokenizer` names a Hugging Face tokenizer file rather than `char` / `word`."""
    return isinstance(kind, str) and kind.endswith(".json")


def _hf_tokenizer(hf_json: str, source: object):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ConfigError("data.tokenizer", source, "char or word: a tokenizer.json needs the hf extra "
                          "(pip install -e '.[hf]')") from None
    try:
        return Tokenizer.from_str(hf_json)
    except Exception as err:  # noqa: BLE001 - whatever the library rejects: one line naming the file
        raise DataError(source, f"not a Hugging Face tokenizer.json ({str(err).splitlines()[0][:160]})") from None


def make_tokenizer(kind: str, texts: Iterable[str], min_freq: int = 1) -> CharTokenizer:
    """`data.tokenizer`'s choice fit on `texts`: char (one token per character), word, or the path of a
    Hugging Face tokenizer.json (its subwords)."""
    if is_hf_tokenizer_file(kind):
        try:
            hf_json = Path(kind).expanduser().read_text(encoding="utf-8")
        except OSError as err:
            raise ConfigError("data.tokenizer", kind, f"a readable tokenizer.json ({err.strerror})") from None
        return HFTokenizer.fit(texts, min_freq=min_freq, hf_json=hf_json)
    if kind not in TOKENIZERS:
        raise ConfigError("data.tokenizer", kind, f"one of {list(TOKENIZERS)} or a Hugging Face tokenizer.json path")
    return (WordTokenizer if kind == "word" else CharTokenizer).fit(texts, min_freq=min_freq)


def load_tokenizer(path: str | os.PathLike) -> CharTokenizer:
    """A run's `vocab.json`, character or word vocabulary (its `format` says which); JSON only."""
    obj = _read_json(path)
    kind = obj.get("format") if isinstance(obj, dict) else None
    return {_WORD_FORMAT: WordTokenizer, _HF_FORMAT: HFTokenizer}.get(kind, CharTokenizer).load(path)


def _check_tokens(tokens: tuple, source: object, words: bool = False) -> None:
    if tokens[: len(SPECIAL_TOKENS)] != SPECIAL_TOKENS:
        raise DataError(source, f"the first tokens must be {list(SPECIAL_TOKENS)}, got {list(tokens[:3])}")
    rest = tokens[len(SPECIAL_TOKENS) :]
    bad = [t for t in rest if not isinstance(t, str) or (len(t) != 1 if not words else not t or t != t.strip())]
    if bad:
        what = "a word without spaces" if words else "one character"
        raise DataError(source, f"every non-special token must be {what}, got {bad[:5]!r}")
    if len(set(rest)) != len(rest):
        raise DataError(source, "duplicate tokens in the vocabulary")


def _read_json(path: str | os.PathLike) -> object:
    """A tokenizer file's JSON (plain data: nothing in it runs), or a DataError naming the file."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise DataError(path, "tokenizer file not found") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(path, f"not a JSON tokenizer file ({err})") from None
