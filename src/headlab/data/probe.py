"""The fixed probe set: the same validation sequences measured at every point of every run.

Head metrics are only comparable across steps, seeds and configs if they are computed on the
same inputs, so the probe set depends only on the data (source, data seed, max_len, vocabulary)
and is fingerprinted by `digest()` for summaries.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from typing import Iterator, Sequence

import torch

from headlab.data.collate import pad_right
from headlab.data.tokenizer import CLS_ID
from headlab.errors import ConfigError


@dataclass(frozen=True)
class ProbeSet:
    """Encoded probe sequences (unpadded, each starting with [CLS]) with their labels.

    `punctuation_ids` are the vocabulary ids that count as punctuation for `punct_mask`.
    """

    input_ids: tuple[tuple[int, ...], ...]
    labels: tuple[int, ...]
    punctuation_ids: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.input_ids) != len(self.labels):
            raise ValueError(f"{len(self.input_ids)} sequences but {len(self.labels)} labels")
        if any(not ids or ids[0] != CLS_ID for ids in self.input_ids):
            raise ValueError("every probe sequence must start with [CLS]")

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def lengths(self) -> list[int]:
        return [len(ids) for ids in self.input_ids]

    def batches(self, chunk_size: int, by_length: bool = False) -> Iterator[dict[str, torch.Tensor]]:
        """Chunks in a fixed order, each padded to its own longest sequence.

        `by_length` chunks the sequences shortest first (ties in probe order): statistics pooled
        over the whole probe are the same, but padding, and so the cost of measuring
        `[batch, head, q, k]` maps, drops several-fold on long-tailed text.
        Yields input_ids Long[b, s], attention_mask / cls_mask / punct_mask Bool[b, s], labels Long[b].
        """
        if not isinstance(chunk_size, int) or chunk_size < 1:
            raise ConfigError("chunk_size", chunk_size, "an integer >= 1")
        punct = torch.tensor(self.punctuation_ids, dtype=torch.long)
        order = sorted(range(len(self)), key=lambda i: len(self.input_ids[i])) if by_length else range(len(self))
        sequences = [self.input_ids[i] for i in order]
        labels = [self.labels[i] for i in order]
        for start in range(0, len(self), chunk_size):
            input_ids, attention_mask = pad_right(sequences[start : start + chunk_size])
            cls_mask = torch.zeros_like(attention_mask)
            cls_mask[:, 0] = True
            yield {
                "input_ids": input_ids,
                "attention_mask": attention_mask,
                "cls_mask": cls_mask,
                "punct_mask": torch.isin(input_ids, punct) & attention_mask,
                "labels": torch.tensor(labels[start : start + chunk_size], dtype=torch.long),
            }

    def digest(self) -> str:
        """sha1 of the token ids: equal digests mean the same probe inputs in the same order."""
        payload = json.dumps([list(ids) for ids in self.input_ids], separators=(",", ":"))
        return hashlib.sha1(payload.encode("ascii")).hexdigest()


def select_probe(
    input_ids: Sequence[Sequence[int]],
    labels: Sequence[int],
    size: int,
    seed: int,
    punctuation_ids: Sequence[int],
) -> ProbeSet:
    """`size` sequences of a split drawn with `seed`, kept in their split order."""
    if not isinstance(size, int) or not 1 <= size <= len(input_ids):
        raise ConfigError("data.probe_size", size, f"an integer in [1, {len(input_ids)}] (the size of the val split)")
    chosen = sorted(random.Random(f"probe/{seed}").sample(range(len(input_ids)), size))
    return ProbeSet(
        input_ids=tuple(tuple(int(i) for i in input_ids[j]) for j in chosen),
        labels=tuple(int(labels[j]) for j in chosen),
        punctuation_ids=tuple(int(i) for i in punctuation_ids),
    )
