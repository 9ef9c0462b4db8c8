"""Character tokenizer: one token per Unicode code point, plus [PAD], [CLS] and [UNK].

Characters, not words, because the questions headlab asks are about where heads look, and a
character-level sequence keeps positions meaningful for Chinese text (no segmenter whose errors
would move the boundaries) and for the synthetic task (one letter = one position).
The vocabulary is a plain list saved as JSON, so loading it never executes code.
"""

from __future__ import annotations

import json
import os
import unicodedata
from collections import Counter
from typing import Iterable, Sequence

from headlab.errors import ConfigError, DataError
from headlab.store import atomic_write_json

PAD, CLS, UNK = "[PAD]", "[CLS]", "[UNK]"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, CLS, UNK)
PAD_ID, CLS_ID, UNK_ID = 0, 1, 2
_FORMAT = "headlab.char_tokenizer"
_VERSION = 1


def is_punctuation(char: str) -> bool:
    """Unicode category P* (covers ASCII and full-width CJK punctuation such as ，。！？“”（）…)."""
    return len(char) == 1 and unicodedata.category(char).startswith("P")


class CharTokenizer:
    """Maps characters to ids; ids 0, 1, 2 are [PAD], [CLS], [UNK] in every vocabulary."""

    def __init__(self, tokens: Sequence[str]) -> None:
        tokens = tuple(tokens)
        _check_tokens(tokens, source="CharTokenizer(tokens)")
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
        atomic_write_json(path, {"format": _FORMAT, "version": _VERSION, "tokens": list(self._tokens)})

    @classmethod
    def load(cls, path: str | os.PathLike) -> "CharTokenizer":
        """Read a vocabulary written by `save`; any other content raises DataError."""
        try:
            with open(path, encoding="utf-8") as fh:
                obj = json.load(fh)
        except FileNotFoundError:
            raise DataError(path, "tokenizer file not found") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise DataError(path, f"not a JSON tokenizer file ({err})") from None
        if not isinstance(obj, dict) or obj.get("format") != _FORMAT or obj.get("version") != _VERSION:
            raise DataError(path, f"not a headlab tokenizer (expected format={_FORMAT!r}, version={_VERSION})")
        tokens = obj.get("tokens")
        if not isinstance(tokens, list):
            raise DataError(path, "'tokens' must be a list of strings")
        _check_tokens(tuple(tokens), source=path)
        return cls(tokens)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharTokenizer) and self._tokens == other._tokens

    def __hash__(self) -> int:
        return hash(self._tokens)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


def _check_tokens(tokens: tuple, source: object) -> None:
    if tokens[: len(SPECIAL_TOKENS)] != SPECIAL_TOKENS:
        raise DataError(source, f"the first tokens must be {list(SPECIAL_TOKENS)}, got {list(tokens[:3])}")
    rest = tokens[len(SPECIAL_TOKENS) :]
    bad = [t for t in rest if not isinstance(t, str) or len(t) != 1]
    if bad:
        raise DataError(source, f"every non-special token must be one character, got {bad[:5]!r}")
    if len(set(rest)) != len(rest):
        raise DataError(source, "duplicate tokens in the vocabulary")
