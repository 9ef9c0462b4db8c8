"""`RepeatTokensDataModule`: repeat_tokens sequences and the induction probe for `task=lm` runs.

All sequences are a function of the data seed `seed` only (as in `TextDataModule`), so runs that
differ in their training seed train on the same stream and are measured on the same probe. The
train split is `n_train` sequences (an epoch), val and test `n_eval` each, drawn from independent
generators; the probe is `probe_size` sequences of Olsson's repeated random block of `probe_half_len`
tokens with up to `probe_max_gap` filler tokens between the copies (`induction_probe`), its own
generator again. Batches are `{input_ids, attention_mask}`,
every position real (fixed length).
"""

from __future__ import annotations

import hashlib
import os

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from headlab.data.repeat_tokens import BOS_ID, check_repeat_keys, induction_probe, repeat_token_batch
from headlab.errors import ConfigError
from headlab.store import atomic_write_json


class TokenIdVocabulary:
    """The vocabulary of a token-id source: ids 0..vocab_size-1, 0 = BOS (what the run directory records)."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def save(self, path: str | os.PathLike) -> None:
        atomic_write_json(path, {"format": "headlab-token-ids", "version": 1, "vocab_size": self.vocab_size, "bos_id": BOS_ID})


class RepeatTokensDataModule(L.LightningDataModule):
    """Random-token sequences with a recurring segment (`headlab.data.repeat_tokens`) for a causal LM."""

    def __init__(self, vocab_size: int = 64, max_len: int = 33, min_segment: int = 4, max_segment: int = 16,
                 fixed_offset: int | None = None, batch_size: int = 32, n_train: int = 96_000, n_eval: int = 512,
                 probe_size: int = 32, probe_half_len: int = 8, probe_max_gap: int = 16, seed: int = 0, num_workers: int = 0) -> None:
        super().__init__()
        check_repeat_keys(vocab_size, max_len, min_segment, max_segment, fixed_offset)
        for key, value, minimum in (("batch_size", batch_size, 1), ("n_train", n_train, 1), ("n_eval", n_eval, 1),
                                    ("probe_size", probe_size, 1), ("seed", seed, 0), ("num_workers", num_workers, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise ConfigError(f"data.{key}", value, f"an integer >= {minimum}")
        if not isinstance(probe_max_gap, int) or probe_max_gap < 0:
            raise ConfigError("data.probe_max_gap", probe_max_gap, "an integer >= 0")
        if not isinstance(probe_half_len, int) or not 2 <= probe_half_len <= (max_len - 1 - probe_max_gap) // 2:
            raise ConfigError("data.probe_half_len", probe_half_len,
                              f"an integer in [2, (max_len - 1 - probe_max_gap) // 2 = {(max_len - 1 - probe_max_gap) // 2}]")
        self.vocab_size, self.max_len = vocab_size, max_len
        self.repeat = dict(vocab_size=vocab_size, seq_len=max_len, min_segment=min_segment, max_segment=max_segment,
                           fixed_offset=fixed_offset)
        self.batch_size, self.n_train, self.n_eval, self.num_workers = batch_size, n_train, n_eval, num_workers
        self.probe_size, self.probe_half_len, self.probe_max_gap, self.seed = probe_size, probe_half_len, probe_max_gap, seed
        self.tokenizer = TokenIdVocabulary(vocab_size)
        self.splits: dict[str, torch.Tensor] = {}
        self.probe: torch.Tensor | None = None  # [probe_size, 1 + 2 * probe_half_len]

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        for offset, (split, n) in enumerate((("train", self.n_train), ("val", self.n_eval), ("test", self.n_eval))):
            generator = torch.Generator().manual_seed(self.seed * 4 + offset)
            self.splits[split] = repeat_token_batch(n, generator=generator, **self.repeat)
        self.probe = induction_probe(self.probe_size, self.vocab_size, self.probe_half_len,
                                     torch.Generator().manual_seed(self.seed * 4 + 3), self.probe_max_gap)

    @property
    def stats(self) -> dict[str, object]:
        """What summary.json records about the data (`headlab.run.summary.run_facts`)."""
        digest = hashlib.sha256(self.probe.numpy().tobytes()).hexdigest()[:16] if self.probe is not None else None
        return {"source": "repeat_tokens", **self.repeat, "n_train": self.n_train, "n_eval": self.n_eval,
                "probe_size": self.probe_size, "probe_half_len": self.probe_half_len, "probe_max_gap": self.probe_max_gap, "probe_digest": digest}

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        tokens = self.splits[split]
        dataset = TensorDataset(tokens)
        generator = torch.Generator().manual_seed(self.seed) if shuffle else None
        return DataLoader(dataset, batch_size=self.batch_size, shuffle=shuffle, generator=generator,
                          num_workers=self.num_workers, collate_fn=_collate)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)


def _collate(rows: list[tuple[torch.Tensor]]) -> dict[str, torch.Tensor]:
    input_ids = torch.stack([row[0] for row in rows])
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids, dtype=torch.bool)}


class ReviewsLMDataModule(RepeatTokensDataModule):
    """A character LM on the zh_reviews texts: the reviews, shuffled with the data seed and split
    into train / val / test, each encoded by character ([CLS] before every review, so it marks a
    review's start) and cut into windows of `max_len` characters. The probe is the same repeated
    random block as repeat_tokens', drawn from the real characters (ids past the special tokens),
    with [CLS] first, so the same scores and ICL positions apply."""

    def __init__(self, max_len: int = 65, batch_size: int = 32, min_freq: int = 2, val_fraction: float = 0.05,
                 test_fraction: float = 0.05, probe_size: int = 32, probe_half_len: int = 16, probe_max_gap: int = 32,
                 seed: int = 0, num_workers: int = 0) -> None:
        L.LightningDataModule.__init__(self)
        for key, value in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
            if not isinstance(value, float) or not 0.0 < value < 0.5:
                raise ConfigError(f"data.{key}", value, "a fraction in (0, 0.5)")
        if not isinstance(probe_half_len, int) or not 2 <= probe_half_len <= (max_len - 1 - probe_max_gap) // 2:
            raise ConfigError("data.probe_half_len", probe_half_len,
                              f"an integer in [2, (max_len - 1 - probe_max_gap) // 2 = {(max_len - 1 - probe_max_gap) // 2}]")
        self.max_len, self.batch_size, self.min_freq, self.num_workers = max_len, batch_size, min_freq, num_workers
        self.fractions = (val_fraction, test_fraction)
        self.probe_size, self.probe_half_len, self.probe_max_gap, self.seed = probe_size, probe_half_len, probe_max_gap, seed
        self.splits, self.probe, self.tokenizer, self.vocab_size = {}, None, None, None
        self._prepare()

    def _prepare(self) -> None:
        """The vocabulary is needed before the model is built (vocab_size), so it is fit at construction."""
        from headlab.data.tokenizer import CLS_ID, SPECIAL_TOKENS, CharTokenizer
        from headlab.data.zh_reviews import load_zh_reviews

        texts = load_zh_reviews().texts
        order = torch.randperm(len(texts), generator=torch.Generator().manual_seed(self.seed)).tolist()
        n_val, n_test = (int(len(texts) * f) for f in self.fractions)
        parts = {"val": order[:n_val], "test": order[n_val:n_val + n_test], "train": order[n_val + n_test:]}
        self.tokenizer = CharTokenizer.fit([texts[i] for i in parts["train"]], min_freq=self.min_freq)
        self.vocab_size = self.tokenizer.vocab_size
        longest = max(len(t) for t in texts) + 1
        for split, index in parts.items():
            stream = torch.tensor([token for i in index for token in self.tokenizer.encode(texts[i], longest)])
            self.splits[split] = stream[: len(stream) // self.max_len * self.max_len].view(-1, self.max_len)
        n_special = len(SPECIAL_TOKENS)
        probe = induction_probe(self.probe_size, self.vocab_size - n_special + 1, self.probe_half_len,
                                torch.Generator().manual_seed(self.seed * 4 + 3), self.probe_max_gap)
        probe[:, 1:] += n_special - 1
        probe[:, 0] = CLS_ID
        self.probe = probe

    def setup(self, stage: str | None = None) -> None:
        pass

    @property
    def stats(self) -> dict[str, object]:
        digest = hashlib.sha256(self.probe.numpy().tobytes()).hexdigest()[:16]
        return {"source": "zh_reviews_lm", "vocab_size": self.vocab_size, "max_len": self.max_len,
                **{f"n_{split}_windows": int(t.shape[0]) for split, t in self.splits.items()},
                "probe_size": self.probe_size, "probe_half_len": self.probe_half_len,
                "probe_max_gap": self.probe_max_gap, "probe_digest": digest}
