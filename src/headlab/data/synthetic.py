"""A seeded task whose label needs three different attention patterns, so head roles are known.

Each text is `L` characters (min_len <= L <= max_len): `L - 1` lowercase letters, then one
final punctuation mark. Three independent, balanced (p = 0.5) binary features are planted:

- a `previous` (previous-token): the marker letter (`marker="y"`) occurs `n_markers` times,
  never at either end. The letters other than the marker and the end letters are split into
  two halves (S: first half in alphabetical order, T: the rest). a = 1 iff the letter right
  before every marker is from S, a = 0 iff it is from T. `n_markers` decoys of the other half
  are planted elsewhere, so the counts of S and T letters, and of any letter, carry nothing;
  content alone cannot find which S or T letter matters: only its position, one before a
  marker. A head that attends from each marker to the previous token reads a. That head is
  content-gated: it is a previous-token head *for the marker queries*, which
  `attention_metrics(..., query_mask=...)` measures (averaged over all queries it need not be).
- b `first_last` (long-range): the last letter (just before the punctuation) equals the first
  letter f, drawn from `end_letters` ("ab": few, so the match is quick to learn). When
  b = 0 the last letter is another end letter g. Either way f occurs exactly 3 times and g
  twice (end letters appear nowhere else), both recur in the middle, and the last letter always occurs earlier too:
  letter counts and "does it repeat" carry no information, only whether the letter in the last
  slot is the one in the first slot does. Reading b needs attention between the two ends of
  the sequence, 15-30 positions apart with the default lengths.
- c `exclaim` (end-of-sequence punctuation / "vertical"): the final character is '!' (c = 1)
  or '.' (c = 0); a head attending to the punctuation token reads c.

label = majority(a, b, c) = 1 iff a + b + c >= 2, the features drawn independently. Any one
feature alone predicts the label 75 % of the time, and so do any two (when they disagree the
third decides); 100 % needs all three. The texts fit the same `CharTokenizer` as real text.
If the letters left for S and T are odd in number, the last one (z with the defaults) is unused.
With RoPE a 2-layer, d_model 64 model learns all three within ~1,000 steps of 32; with
sinusoidal positions the `previous` feature is the slowest, several times slower.
"""

from __future__ import annotations

import random
import string

from headlab.data.labeled import LabeledTexts
from headlab.errors import ConfigError

FEATURES = ("previous", "first_last", "exclaim")


def generate_synthetic(
    n: int = 4000,
    seed: int = 0,
    min_len: int = 16,
    max_len: int = 32,
    marker: str = "y",
    n_markers: int = 2,
    letters: str = string.ascii_lowercase,
    end_letters: str = "ab",
) -> LabeledTexts:
    """`n` texts of the majority-of-three task; `features` holds each text's (a, b, c) flags."""
    halves = _check_args(n, min_len, max_len, marker, n_markers, letters, end_letters)
    rng = random.Random(seed)
    texts: list[str] = []
    flags: dict[str, list[int]] = {name: [] for name in FEATURES}
    for _ in range(n):
        a, b, c = (rng.random() < 0.5 for _ in FEATURES)
        n_letters = rng.randint(min_len, max_len) - 1
        texts.append(_one_text(rng, n_letters, (a, b, c), marker, n_markers, halves, end_letters))
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
    marker: str,
    n_markers: int,
    halves: tuple[str, str],
    end_letters: str,
) -> str:
    """Letters at 0..n_letters-1 (first = 0, last = n_letters-1, middle between), then '!' or '.'."""
    a, b, c = flags
    before, decoy = halves if a else halves[::-1]
    chars = [rng.choice(halves[0] + halves[1]) for _ in range(n_letters)]
    first, last = 0, n_letters - 1
    markers = _marker_positions(rng, first + 2, last, n_markers)
    taken = {first, last}
    for p in markers:
        chars[p], chars[p - 1] = marker, rng.choice(before)
        taken.update((p - 1, p))
    free = rng.sample([p for p in range(first + 1, last) if p not in taken], n_markers + 3)
    for p in free[:n_markers]:
        chars[p] = rng.choice(decoy)
    # f three times and g twice whatever b is, both always in the middle: only the last slot differs
    f = rng.choice(end_letters)
    g = rng.choice(end_letters.replace(f, ""))
    chars[first], chars[last] = f, (f if b else g)
    for p, letter in zip(free[n_markers:], (f, g, g) if b else (f, f, g)):
        chars[p] = letter
    return "".join(chars) + ("!" if c else ".")


def _marker_positions(rng: random.Random, lo: int, hi: int, n_markers: int) -> list[int]:
    """`n_markers` positions in lo..hi-1, no two adjacent (a marker never precedes a marker)."""
    while True:
        positions = sorted(rng.sample(range(lo, hi), n_markers))
        if all(q - p >= 2 for p, q in zip(positions, positions[1:])):
            return positions


def _check_args(
    n: int, min_len: int, max_len: int, marker: str, n_markers: int, letters: str, end_letters: str
) -> tuple[str, str]:
    """Validate up front; return the two halves (S, T) of the letters a marker can follow."""
    if not isinstance(n, int) or n < 1:
        raise ConfigError("data.synthetic.n", n, "an integer >= 1")
    if not isinstance(n_markers, int) or n_markers < 1:
        raise ConfigError("data.synthetic.n_markers", n_markers, "an integer >= 1")
    # first, last, punctuation, then in the middle: markers, their predecessors, decoys, 3 end-letter slots
    shortest = 3 * n_markers + 6
    if not isinstance(min_len, int) or min_len < shortest:
        raise ConfigError("data.synthetic.min_len", min_len, f"an integer >= {shortest} (with n_markers={n_markers})")
    if not isinstance(max_len, int) or max_len < min_len:
        raise ConfigError("data.synthetic.max_len", max_len, f"an integer >= min_len={min_len}")
    alphabet = "".join(dict.fromkeys(letters))
    if any(ch in "!." for ch in alphabet):
        raise ConfigError("data.synthetic.letters", letters, "letters without '!' or '.'")
    if len(marker) != 1 or marker not in alphabet:
        raise ConfigError("data.synthetic.marker", marker, f"one character from letters={letters!r}")
    distinct = set(end_letters)
    if len(distinct) < 2 or len(distinct) != len(end_letters) or not distinct <= set(alphabet) - {marker}:
        raise ConfigError("data.synthetic.end_letters", end_letters, f"2 or more distinct letters from {letters!r} other than the marker")
    rest = [ch for ch in alphabet if ch != marker and ch not in distinct]
    if len(rest) < 4:
        raise ConfigError("data.synthetic.letters", letters, "at least 4 letters besides the marker and the end letters")
    half = len(rest) // 2
    return "".join(rest[:half]), "".join(rest[half:2 * half])
