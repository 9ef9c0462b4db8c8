"""A seeded task whose label needs three different attention patterns, so head roles are known.

Each text is `L` characters (min_len <= L <= max_len): `L - 1` lowercase letters, then one
final punctuation mark. Three independent, balanced (p = 0.5) binary features are planted:

- a `bigram` (local / previous-token): the letters x and y (`bigram="xy"`) occur exactly
  `n_pairs` times each; a = 1 iff every y comes right after an x, a = 0 iff none does (they sit
  apart or in the order "yx"). The mere presence or count of the letters says nothing; a head
  attending from each y to the token just before it reads a.
- b `first_last` (long-range): the last letter (just before the punctuation) equals the first
  letter f, drawn from `end_letters` ("ab": few, so the match is quick to learn). When
  b = 0 the last letter is another end letter g. Either way f occurs 3 times and g twice (plus
  chance occurrences), both recur in the middle, and the last letter always occurs earlier too:
  letter counts and "does it repeat" carry no information, only whether the letter in the last
  slot is the one in the first slot does. Reading b needs attention between the two ends of
  the sequence, 15-30 positions apart with the default lengths.
- c `exclaim` (end-of-sequence punctuation / "vertical"): the final character is '!' (c = 1)
  or '.' (c = 0); a head attending to the punctuation token reads c.

label = majority(a, b, c) = 1 iff a + b + c >= 2, the features drawn independently. Any one
feature alone predicts the label 75 % of the time, and so do any two (when they disagree the
third decides); 100 % needs all three. Letters elsewhere are drawn uniformly from all but x and
y, so the texts fit the same `CharTokenizer` as real text. The long-range match is the slowest
feature to learn: it needs token identity, so it stalls if position signals swamp the token
embeddings at init.
"""

from __future__ import annotations

import random
import string

from headlab.data.labeled import LabeledTexts
from headlab.errors import ConfigError

FEATURES = ("bigram", "first_last", "exclaim")


def generate_synthetic(
    n: int = 4000,
    seed: int = 0,
    min_len: int = 16,
    max_len: int = 32,
    bigram: str = "xy",
    letters: str = string.ascii_lowercase,
    end_letters: str = "ab",
    n_pairs: int = 2,
) -> LabeledTexts:
    """`n` texts of the majority-of-three task; `features` holds each text's (a, b, c) flags."""
    background = _check_args(n, min_len, max_len, bigram, letters, end_letters, n_pairs)
    rng = random.Random(seed)
    texts: list[str] = []
    flags: dict[str, list[int]] = {name: [] for name in FEATURES}
    for _ in range(n):
        a, b, c = (rng.random() < 0.5 for _ in FEATURES)
        n_letters = rng.randint(min_len, max_len) - 1
        texts.append(_one_text(rng, n_letters, (a, b, c), bigram, background, end_letters, n_pairs))
        for name, value in zip(FEATURES, (a, b, c)):
            flags[name].append(int(value))
    labels = [int(a + b + c >= 2) for a, b, c in zip(*(flags[f] for f in FEATURES))]
    stats = {"n_examples": n, "n_positive": sum(labels)}
    stats.update({f"n_{name}": sum(v) for name, v in flags.items()})
    return LabeledTexts(texts=texts, labels=labels, label_names=["0", "1"], stats=stats, features=flags)


def _one_text(
    rng: random.Random,
    n_letters: int,
    flags: tuple[bool, bool, bool],
    bigram: str,
    background: str,
    end_letters: str,
    n_pairs: int,
) -> str:
    """Letters at 0..n_letters-1 (first = 0, last = n_letters-1, middle between), then '!' or '.'."""
    a, b, c = flags
    chars = [rng.choice(background) for _ in range(n_letters)]
    first, last = 0, n_letters - 1
    middle = list(range(first + 1, last))
    xs, ys = _bigram_positions(rng, middle, a, n_pairs)
    for p in xs:
        chars[p] = bigram[0]
    for p in ys:
        chars[p] = bigram[1]
    # f three times and g twice whatever b is, both always in the middle: only the last slot differs
    f = rng.choice(end_letters)
    g = rng.choice(end_letters.replace(f, ""))
    chars[first], chars[last] = f, (f if b else g)
    free = rng.sample([p for p in middle if p not in xs and p not in ys], 3)
    for p, letter in zip(free, (f, g, g) if b else (f, f, g)):
        chars[p] = letter
    return "".join(chars) + ("!" if c else ".")


def _bigram_positions(rng: random.Random, middle: list[int], a: bool, n_pairs: int) -> tuple[list[int], list[int]]:
    """Where the x's and y's go: each y right after an x when a, no y right after an x otherwise."""
    while True:
        if a:
            xs = rng.sample(middle[:-1], n_pairs)
            ys = [p + 1 for p in xs]
        else:
            cells = rng.sample(middle, 2 * n_pairs)
            xs, ys = cells[:n_pairs], cells[n_pairs:]
        if len(set(xs + ys)) == 2 * n_pairs and (a or not any(p + 1 in ys for p in xs)):
            return xs, ys


def _check_args(
    n: int, min_len: int, max_len: int, bigram: str, letters: str, end_letters: str, n_pairs: int
) -> str:
    """Validate up front; return the background letters (all but the bigram's)."""
    if not isinstance(n, int) or n < 1:
        raise ConfigError("data.synthetic.n", n, "an integer >= 1")
    if not isinstance(n_pairs, int) or n_pairs < 1:
        raise ConfigError("data.synthetic.n_pairs", n_pairs, "an integer >= 1")
    shortest = 2 * n_pairs + 7  # first, last, punctuation, the pairs, 3 distractor slots, room to keep pairs apart
    if not isinstance(min_len, int) or min_len < shortest:
        raise ConfigError("data.synthetic.min_len", min_len, f"an integer >= {shortest} (with n_pairs={n_pairs})")
    if not isinstance(max_len, int) or max_len < min_len:
        raise ConfigError("data.synthetic.max_len", max_len, f"an integer >= min_len={min_len}")
    if len(bigram) != 2 or bigram[0] == bigram[1] or not set(bigram) <= set(letters):
        raise ConfigError("data.synthetic.bigram", bigram, f"two different characters from letters={letters!r}")
    background = "".join(ch for ch in dict.fromkeys(letters) if ch not in bigram)
    if len(background) < 2 or any(ch in "!." for ch in letters):
        raise ConfigError("data.synthetic.letters", letters, "at least 2 letters besides the bigram, and no '!' or '.'")
    distinct = set(end_letters)
    if len(distinct) < 2 or len(distinct) != len(end_letters) or not distinct <= set(background):
        raise ConfigError("data.synthetic.end_letters", end_letters, f"2 or more distinct letters from {background!r}")
    return background
