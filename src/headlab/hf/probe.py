"""A fixed probe set under a pretrained model's own tokenizer: chunks `measure_probe` consumes.

Special tokens and punctuation come from the model's vocabulary: `cls_mask` marks [CLS], the
last real token is [SEP] (so `last_attention` is the mass on [SEP]), and `punct_mask` marks
vocabulary tokens made only of Unicode punctuation ("。", "，", ".", ","). Distances are in tokens.
The [UNK] rate is the share of real, non-special probe tokens that map to [UNK].
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import torch

from headlab.data.tokenizer import is_punctuation
from headlab.errors import ConfigError, DataError


@dataclass(frozen=True)
class HFProbe:
    """Encoded probe sequences (each `[CLS] ... [SEP]`, unpadded) and what the vocabulary made of them."""

    input_ids: list[list[int]]
    cls_id: int
    pad_id: int
    punctuation_ids: frozenset[int]
    unk_rate: float
    n_tokens: int
    n_truncated: int

    def chunks(self, chunk_size: int, device: torch.device | str = "cpu") -> list[dict[str, torch.Tensor]]:
        """Chunks of up to `chunk_size` sequences, grouped by length (longest first, as `probe_chunks`)."""
        order = sorted(range(len(self.input_ids)), key=lambda i: len(self.input_ids[i]))
        punct = torch.tensor(sorted(self.punctuation_ids), dtype=torch.long)
        out = []
        for start in range(0, len(order), chunk_size):
            seqs = [self.input_ids[i] for i in order[start : start + chunk_size]]
            width = max(len(s) for s in seqs)
            ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(seqs), width), dtype=torch.bool)
            for row, seq in enumerate(seqs):
                ids[row, : len(seq)] = torch.tensor(seq)
                mask[row, : len(seq)] = True
            out.append({"input_ids": ids.to(device), "attention_mask": mask.to(device),
                        "cls_mask": ((ids == self.cls_id) & mask).to(device),
                        "punct_mask": (torch.isin(ids, punct) & mask).to(device)})
        return out[::-1]


def punctuation_ids(tokenizer: Any) -> frozenset[int]:
    """Ids of vocabulary tokens made only of punctuation characters (never special tokens)."""
    special = set(tokenizer.all_special_tokens)
    return frozenset(i for tok, i in tokenizer.get_vocab().items()
                     if tok not in special and tok and all(is_punctuation(c) for c in tok))


def encode_probe(tokenizer: Any, texts: list[str], size: int, max_len: int, seed: int = 0,
                 decoder: bool = False) -> HFProbe:
    """A seeded sample of `size` texts (all when fewer), tokenised with truncation to `max_len`.

    A decoder's sequences are BOS + text (as TransformerLens prepends BOS; GPT-2 and Pythia tokenizers
    add none themselves): `cls_mask` then marks the BOS, the position decoders use as attention sink."""
    if decoder:
        return _encode_decoder_probe(tokenizer, texts, size, max_len, seed)
    if not isinstance(size, int) or size < 1:
        raise ConfigError("data.probe_size", size, "an integer >= 1")
    if not isinstance(max_len, int) or max_len < 3:
        raise ConfigError("data.max_len", max_len, "an integer >= 3 ([CLS], a token, [SEP])")
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        raise DataError("data", "no non-blank text to measure")
    picked = sorted(random.Random(seed).sample(range(len(texts)), min(size, len(texts))))
    sample = [texts[i] for i in picked]
    full = tokenizer(sample, truncation=False, add_special_tokens=True)["input_ids"]
    encoded = tokenizer(sample, truncation=True, max_length=max_len, add_special_tokens=True)["input_ids"]
    special = set(tokenizer.all_special_ids)
    content = [i for seq in encoded for i in seq if i not in special or i == tokenizer.unk_token_id]
    n_unk = sum(i == tokenizer.unk_token_id for i in content)
    return HFProbe(input_ids=[list(s) for s in encoded], cls_id=tokenizer.cls_token_id, pad_id=tokenizer.pad_token_id,
                   punctuation_ids=punctuation_ids(tokenizer), unk_rate=n_unk / max(len(content), 1),
                   n_tokens=len(content), n_truncated=sum(len(f) > max_len for f in full))


def _sample(texts: list[str], size: int, seed: int) -> list[str]:
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        raise DataError("data", "no non-blank text to measure")
    picked = sorted(random.Random(seed).sample(range(len(texts)), min(size, len(texts))))
    return [texts[i] for i in picked]


def _encode_decoder_probe(tokenizer: Any, texts: list[str], size: int, max_len: int, seed: int) -> HFProbe:
    """BOS + the text's tokens, truncated to `max_len` in all; [UNK] counted only where the vocabulary has
    one of its own (byte-level BPE has none: its `unk_token` is often the BOS/EOS token itself)."""
    if not isinstance(size, int) or size < 1:
        raise ConfigError("data.probe_size", size, "an integer >= 1")
    if not isinstance(max_len, int) or max_len < 3:
        raise ConfigError("data.max_len", max_len, "an integer >= 3 (BOS and two tokens)")
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    if bos is None:
        raise DataError("tokenizer", "a decoder tokenizer with a BOS or EOS token (the probe starts with it)")
    full = tokenizer(_sample(texts, size, seed), add_special_tokens=False)["input_ids"]
    encoded = [[bos] + list(seq[: max_len - 1]) for seq in full]
    unk = tokenizer.unk_token_id if tokenizer.unk_token_id not in (bos, tokenizer.eos_token_id) else None
    content = [i for seq in encoded for i in seq[1:]]
    n_unk = sum(i == unk for i in content) if unk is not None else 0
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else bos
    return HFProbe(input_ids=encoded, cls_id=bos, pad_id=pad, punctuation_ids=punctuation_ids(tokenizer),
                   unk_rate=n_unk / max(len(content), 1), n_tokens=len(content),
                   n_truncated=sum(len(f) > max_len - 1 for f in full))
