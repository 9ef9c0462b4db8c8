"""English text shipped inside a wheel: the gensim package's test corpora (nothing downloads).

``en_polarity``: 200 English movie-review sentences with their polarity (Pang & Lee sentence polarity,
100 neg + 100 pos, `gensim/test/test_data/pang_lee_polarity.cor`): a small labelled English source for
headlab-train (`data=en_polarity`) and headlab-analyze-hf. gensim is in the `hf` extra.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from headlab.data.labeled import LabeledTexts
from headlab.errors import DataError


def load_en_polarity() -> LabeledTexts:
    """The 200 Pang & Lee sentences with their labels (0 = neg, 1 = pos; 100 each), e.g. for importance."""
    lines = gensim_lines("pang_lee_polarity.cor", strip_labels=False)
    labels = [int(line.startswith("__label__pos")) for line in lines]
    texts = [line.split(" ", 1)[1].strip() for line in lines]
    return LabeledTexts(texts=texts, labels=labels, label_names=["neg", "pos"], stats={"n_examples": len(texts)})


def gensim_lines(name: str, strip_labels: bool = True) -> list[str]:
    """Non-blank lines of a gensim test-data file, fastText `__label__x ` prefixes removed."""
    spec = importlib.util.find_spec("gensim")  # finds the folder without importing gensim
    if spec is None or not spec.submodule_search_locations:
        raise DataError(name, "the package gensim is not installed (pip install -e '.[hf]')")
    file = Path(next(iter(spec.submodule_search_locations))) / "test" / "test_data" / name
    if not file.is_file():
        raise DataError(file, "missing from the installed gensim (expected in gensim >= 4.0 wheels)")
    raw = file.read_bytes()
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError:  # lee_background.cor is Windows-1252 (0x97 = em dash)
        lines = raw.decode("cp1252", errors="replace").splitlines()
    return [line.split(" ", 1)[1].strip() if strip_labels and line.startswith("__label__") else line.strip()
            for line in lines if line.strip()]
