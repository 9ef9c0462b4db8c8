"""The fixed probe set as the measurement consumes it: device chunks, plus optional query masks."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch

from headlab.errors import ConfigError

PROBE_KEYS = ("input_ids", "attention_mask", "cls_mask", "punct_mask")  # each [batch, seq]


def probe_chunks(probe: Any, chunk_size: int, device: torch.device | str = "cpu") -> list[dict[str, torch.Tensor]]:
    """The probe's chunks as they are measured: grouped by length, longest chunk first.

    `probe` is a `headlab.data.ProbeSet` (anything with `batches(size, by_length=True)` yielding
    dicts of `[batch, seq]` tensors under `PROBE_KEYS`). Grouping by length cuts padding; longest
    first keeps memory flat in the probe size: every later chunk's maps fit in the blocks the
    allocator freed from a bigger one (shortest first, glibc kept growing the heap with each
    longer chunk: +460 MB of RSS for 8,192 sequences). The pooled sums do not depend on the order.
    """
    chunks = [{k: chunk[k].to(device) for k in PROBE_KEYS} for chunk in probe.batches(chunk_size, by_length=True)]
    return chunks[::-1]


def add_query_masks(chunks: Sequence[dict[str, Any]], token_ids: Mapping[str, int]) -> None:
    """Give each chunk `query_masks[token]` `[batch, seq]`: the queries at that token (never padding)."""
    for chunk in chunks:
        chunk["query_masks"] = {tok: chunk["input_ids"] == i for tok, i in token_ids.items()}


def query_token_ids(tokens: Sequence[str], tokenizer: Any, key: str = "callbacks.head_metrics.query_tokens") -> dict[str, int]:
    """Vocabulary id of each query token; an unknown one is a config error naming the vocabulary."""
    vocabulary = tuple(getattr(tokenizer, "tokens", ()))
    if not vocabulary:
        raise ConfigError(key, list(tokens), "a datamodule with a `tokenizer` (headlab's TextDataModule)")
    missing = [t for t in tokens if t not in vocabulary]
    if missing:
        sample = " ".join(vocabulary[:40]) + (" ..." if len(vocabulary) > 40 else "")
        raise ConfigError(key, missing[0], f"a token of this run's vocabulary ({len(vocabulary)} tokens: {sample})")
    return {t: tokenizer.token_to_id(t) for t in tokens}
