"""Dynamic right-padding: each batch is padded to its own longest sequence, not to max_len."""

from __future__ import annotations

from typing import Sequence

import torch

from headlab.data.tokenizer import PAD_ID


def pad_right(sequences: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> tuple[torch.Tensor, torch.Tensor]:
    """`input_ids: Long[batch, seq]`, `attention_mask: Bool[batch, seq]` (True = real token)."""
    if not sequences:
        raise ValueError("cannot pad an empty batch")
    lengths = torch.tensor([len(s) for s in sequences])
    input_ids = torch.full((len(sequences), int(lengths.max())), pad_id, dtype=torch.long)
    for row, seq in enumerate(sequences):
        input_ids[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
    attention_mask = torch.arange(input_ids.shape[1])[None, :] < lengths[:, None]
    return input_ids, attention_mask


def collate_batch(items: Sequence[tuple[Sequence[int], int] | tuple[Sequence[int], int, int]]) -> dict[str, torch.Tensor]:
    """(ids, label) pairs -> {"input_ids": Long[b, s], "attention_mask": Bool[b, s], "labels": Long[b]};
    (ids, label, domain id) triples add "domain_ids": Long[b]."""
    input_ids, attention_mask = pad_right([item[0] for item in items])
    labels = torch.tensor([item[1] for item in items], dtype=torch.long)
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
    if len(items[0]) == 3:
        batch["domain_ids"] = torch.tensor([item[2] for item in items], dtype=torch.long)
    return batch
