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
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from headlab.config.values import check_int
from headlab.data.datamodule import KeepsTrainPosition, ResumableLoader
from headlab.data.sampler import ReplayedShuffleBatches
from headlab.data.repeat_tokens import BOS_ID, check_repeat_keys, induction_probe, repeat_token_batch, text_induction_probe
from headlab.errors import ConfigError, DataError
from headlab.store import atomic_write_json


class TokenIdVocabulary:
    """The vocabulary of a token-id source: ids 0..vocab_size-1, 0 = BOS (what the run directory records)."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def save(self, path: str | os.PathLike) -> None:
        atomic_write_json(path, {"format": "headlab-token-ids", "version": 1, "vocab_size": self.vocab_size, "bos_id": BOS_ID})


class RepeatTokensDataModule(KeepsTrainPosition, L.LightningDataModule):
    """Random-token sequences with a recurring segment (`headlab.data.repeat_tokens`) for a causal LM."""

    def __init__(self, vocab_size: int = 64, max_len: int = 33, min_segment: int = 4, max_segment: int = 16,
                 fixed_offset: int | None = None, batch_size: int = 32, n_train: int = 96_000, n_eval: int = 512,
                 probe_size: int = 32, probe_half_len: int = 8, probe_max_gap: int = 16, seed: int = 0, num_workers: int = 0) -> None:
        super().__init__()
        check_repeat_keys(vocab_size, max_len, min_segment, max_segment, fixed_offset)
        for key, value, minimum in (("batch_size", batch_size, 1), ("n_train", n_train, 1), ("n_eval", n_eval, 1),
                                    ("probe_size", probe_size, 1), ("seed", seed, 0), ("num_workers", num_workers, 0)):
            check_int(f"data.{key}", value, minimum)
        check_int("data.probe_max_gap", probe_max_gap, 0)
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

    def repeated_probe(self, n: int) -> torch.Tensor:
        """The standard induction test (Olsson et al.; TransformerLens' demo), `[n, 1 + 2 L]`: BOS, L random
        tokens, the same L again, L = (max_len - 1) // 2 (the longest that fits), so the copy is always
        L back. A seed of its own (REPEATED_PROBE_SEED + the data seed): the gapped probe is unchanged."""
        return induction_probe(n, self.vocab_size, (self.max_len - 1) // 2, _repeated_probe_generator(self.seed))

    @property
    def stats(self) -> dict[str, object]:
        """What summary.json records about the data (`headlab.tasks.summary.run_facts`)."""
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
        """The train split in the order a seeded shuffling loader gives, resumable mid-epoch: a killed run
        continues with the batches it had not trained on (`ResumableLoader`, `ReplayedShuffleBatches`)."""
        batches = ReplayedShuffleBatches(len(self.splits["train"]), self.batch_size, self.seed)
        # its own generator for the loader's base seed: building it again after a resume draws nothing from torch's
        return self._resumable(ResumableLoader(TensorDataset(self.splits["train"]), batch_sampler=batches,
                                               num_workers=self.num_workers, collate_fn=_collate,
                                               generator=torch.Generator().manual_seed(self.seed)))

    def state_dict(self) -> dict[str, Any]:
        """The train loader's position, in every checkpoint (`KeepsTrainPosition`)."""
        return self._position_state()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._restore_position(state_dict)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)


REPEATED_PROBE_SEED = 2**31  # above every split's and the probe's seed (seed * 4 + 0..3) for data seeds < 2**29


def _repeated_probe_generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(REPEATED_PROBE_SEED + seed)


def _collate(rows: list[tuple[torch.Tensor]]) -> dict[str, torch.Tensor]:
    input_ids = torch.stack([row[0] for row in rows])
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids, dtype=torch.bool)}


# What a text LM's gapped induction probe is made of: random frequent characters, or the held-out
# (val) texts themselves, so the probe reads like the user's own sentences.
PROBE_SOURCES = ("random", "held_out")


class TextLMDataModule(RepeatTokensDataModule):
    """A character LM on texts (`_load_texts` gives them per split): each split encoded by character
    ([CLS] before every text, so it marks a text's start) and cut into windows of `max_len`
    characters. The probe is the same repeated random block as repeat_tokens', with [CLS] first, so
    the same scores and ICL positions apply; its block and filler are drawn uniformly from the
    `probe_vocab` most frequent characters of the train split (null: every character of the
    vocabulary). Drawn from all characters, a probe of a real-text vocabulary is mostly rare
    characters the model has learnt to give almost no probability: it tests the unigram prior more
    than copying (a shortened reviews run scored a probe loss above ln |vocab|)."""

    source = "text_lm"

    def __init__(self, max_len: int = 65, batch_size: int = 32, min_freq: int = 2, val_fraction: float = 0.05,
                 test_fraction: float = 0.05, probe_size: int = 32, probe_half_len: int = 16, probe_max_gap: int = 32,
                 probe_vocab: int | None = 256, seed: int = 0, num_workers: int = 0, probe_source: str = "random") -> None:
        L.LightningDataModule.__init__(self)
        if probe_source not in PROBE_SOURCES:
            raise ConfigError("data.probe_source", probe_source, f"one of {list(PROBE_SOURCES)}")
        self.probe_source = probe_source
        for key, value in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
            if not isinstance(value, float) or not 0.0 < value < 0.5:
                raise ConfigError(f"data.{key}", value, "a fraction in (0, 0.5)")
        for key, value, minimum in (("max_len", max_len, 4), ("batch_size", batch_size, 1), ("probe_size", probe_size, 1),
                                    ("seed", seed, 0), ("num_workers", num_workers, 0)):
            check_int(f"data.{key}", value, minimum)
        check_int("data.probe_max_gap", probe_max_gap, 0)
        if not isinstance(probe_half_len, int) or not 2 <= probe_half_len <= (max_len - 1 - probe_max_gap) // 2:
            raise ConfigError("data.probe_half_len", probe_half_len,
                              f"an integer in [2, (max_len - 1 - probe_max_gap) // 2 = {(max_len - 1 - probe_max_gap) // 2}]")
        if probe_vocab is not None and (not isinstance(probe_vocab, int) or isinstance(probe_vocab, bool) or probe_vocab < 2):
            raise ConfigError("data.probe_vocab", probe_vocab, "null (every character) or an integer >= 2")
        self.max_len, self.batch_size, self.min_freq, self.num_workers = max_len, batch_size, min_freq, num_workers
        self.fractions = (val_fraction, test_fraction)
        self.probe_size, self.probe_half_len, self.probe_max_gap, self.seed = probe_size, probe_half_len, probe_max_gap, seed
        self.probe_vocab = probe_vocab
        self.splits, self.probe, self.tokenizer, self.vocab_size = {}, None, None, None
        self.probe_ids: torch.Tensor | None = None  # the character ids the probe draws from
        self._prepare()

    def _load_texts(self) -> dict[str, list[str]]:
        """The texts of each split: train, val, test."""
        raise NotImplementedError

    def _split(self, texts: list[str]) -> dict[str, list[str]]:
        """One list of texts shuffled with the data seed and split by val_fraction / test_fraction."""
        order = torch.randperm(len(texts), generator=torch.Generator().manual_seed(self.seed)).tolist()
        n_val, n_test = (int(len(texts) * f) for f in self.fractions)
        parts = {"val": order[:n_val], "test": order[n_val:n_val + n_test], "train": order[n_val + n_test:]}
        return {split: [texts[i] for i in index] for split, index in parts.items()}

    def _prepare(self) -> None:
        """The vocabulary is needed before the model is built (vocab_size), so it is fit at construction."""
        from headlab.data.tokenizer import CLS_ID, CharTokenizer

        texts = self._load_texts()
        self.tokenizer = CharTokenizer.fit(texts["train"], min_freq=self.min_freq)
        self.vocab_size = self.tokenizer.vocab_size
        longest = max(len(t) for split in texts.values() for t in split) + 1
        for split, part in texts.items():
            stream = torch.tensor([token for text in part for token in self.tokenizer.encode(text, longest)], dtype=torch.long)
            self.splits[split] = stream[: len(stream) // self.max_len * self.max_len].view(-1, self.max_len)
        self.probe_ids = frequent_ids(self.splits["train"], self.vocab_size, self.probe_vocab)
        generator = torch.Generator().manual_seed(self.seed * 4 + 3)
        if self.probe_source == "held_out":  # the user's own val texts, each block repeated once
            held_out = torch.tensor([t for text in texts["val"] for t in self.tokenizer.encode(text, longest)], dtype=torch.long)
            probe = text_induction_probe(held_out, self.probe_size, self.probe_half_len, generator, self.probe_max_gap)
        else:
            probe = induction_probe(self.probe_size, len(self.probe_ids) + 1, self.probe_half_len, generator, self.probe_max_gap)
            probe = self.probe_ids[probe - 1]  # draws 1..k -> the k chosen character ids
        probe[:, 0] = CLS_ID
        self.probe = probe

    def setup(self, stage: str | None = None) -> None:
        pass

    def repeated_probe(self, n: int) -> torch.Tensor:
        """The standard test of `RepeatTokensDataModule.repeated_probe`, its tokens drawn as the gapped
        probe's are: uniformly from the `probe_vocab` most frequent train characters, [CLS] first."""
        from headlab.data.tokenizer import CLS_ID

        draws = induction_probe(n, len(self.probe_ids) + 1, (self.max_len - 1) // 2, _repeated_probe_generator(self.seed))
        probe = self.probe_ids[draws - 1]
        probe[:, 0] = CLS_ID
        return probe

    @property
    def stats(self) -> dict[str, object]:
        digest = hashlib.sha256(self.probe.numpy().tobytes()).hexdigest()[:16]
        return {"source": self.source, "vocab_size": self.vocab_size, "max_len": self.max_len,
                **{f"n_{split}_windows": int(t.shape[0]) for split, t in self.splits.items()},
                "probe_size": self.probe_size, "probe_half_len": self.probe_half_len,
                "probe_max_gap": self.probe_max_gap, "probe_vocab": len(self.probe_ids), "probe_digest": digest}


def frequent_ids(windows: torch.Tensor, vocab_size: int, k: int | None) -> torch.Tensor:
    """The `k` most frequent non-special token ids in `windows` (ties: the smaller id), sorted;
    k=None, or more than occur: every non-special id that occurs. Specials (PAD, CLS, UNK) never."""
    from headlab.data.tokenizer import SPECIAL_TOKENS

    counts = torch.bincount(windows.reshape(-1), minlength=vocab_size)[:vocab_size].clone()
    counts[: len(SPECIAL_TOKENS)] = 0
    seen = int((counts > 0).sum())
    if seen < 2:
        raise DataError("train split", f"only {seen} distinct non-special characters: the probe needs at least 2")
    k = seen if k is None else min(k, seen)
    order = sorted(range(vocab_size), key=lambda i: (-int(counts[i]), i))[:k]
    return torch.tensor(sorted(order), dtype=torch.long)


class ReviewsLMDataModule(TextLMDataModule):
    """A character LM on the zh_reviews texts, shuffled with the data seed and split into train /
    val / test (`TextLMDataModule`)."""

    source = "zh_reviews_lm"

    def _load_texts(self) -> dict[str, list[str]]:
        from headlab.data.zh_reviews import load_zh_reviews

        return self._split(load_zh_reviews().texts)


class FilesLMDataModule(TextLMDataModule):
    """A character LM on the user's own texts: the `text` column (`files.text_column`) of a CSV / JSON lines file
    (`headlab.data.files.load_texts`; a `label` column is not needed and is ignored). Without val /
    test files the train file is split by val_fraction / test_fraction with the data seed."""

    source = "files_lm"

    def __init__(self, files: dict | None = None, **kwargs: object) -> None:
        files = dict(files or {})
        unknown = sorted(set(files) - {"train", "val", "test", "text_column"})
        if unknown:
            raise ConfigError(f"data.files.{unknown[0]}", files[unknown[0]], "one of the keys train, val, test, text_column")
        if not files.get("train"):
            raise ConfigError("data.files.train", files.get("train"), "the path of a CSV or JSONL file with a 'text' column")
        self.files = files
        super().__init__(**kwargs)

    def _load_texts(self) -> dict[str, list[str]]:
        from headlab.data.files import load_texts

        column = self.files.get("text_column") or "text"
        train = load_texts(self.files["train"], column)
        given = {split: load_texts(self.files[split], column) for split in ("val", "test") if self.files.get(split)}
        if len(given) == 2:
            return {"train": train, **given}
        parts = self._split(train)
        if "val" in given:
            return {"train": parts["train"] + parts["val"], "val": given["val"], "test": parts["test"]}
        if "test" in given:
            return {"train": parts["train"] + parts["test"], "val": parts["val"], "test": given["test"]}
        return parts
