"""TextDataModule: batches, train-only vocabulary, stats, validation, seeded probe set."""

from __future__ import annotations

import pytest
import torch

from headlab.data import CLS_ID, PAD_ID, UNK_ID, TextDataModule, collate_batch
from headlab.errors import ConfigError

SYN = {"n": 400, "min_len": 12, "max_len": 30}


def _synthetic(**kwargs) -> TextDataModule:
    args = {"source": "synthetic", "synthetic": SYN, "probe_size": 16, "batch_size": 8, "max_len": 24}
    args.update(kwargs)
    dm = TextDataModule(**args)
    dm.setup("fit")
    return dm


def test_collate_pads_right_with_mask_from_lengths():
    batch = collate_batch([([1, 5, 6], 0), ([1, 7], 1), ([1, 8, 9, 4, 3], 1)])
    assert batch["input_ids"].tolist() == [[1, 5, 6, 0, 0], [1, 7, 0, 0, 0], [1, 8, 9, 4, 3]]
    assert batch["attention_mask"].sum(1).tolist() == [3, 2, 5]
    assert batch["attention_mask"].dtype == torch.bool
    assert batch["labels"].tolist() == [0, 1, 1]


@pytest.mark.parametrize("bucket", [True, False])
def test_train_batches_follow_the_contract(bucket):
    dm = _synthetic(bucket_by_length=bucket, shuffle_seed=0)
    seen = 0
    for batch in dm.train_dataloader():
        ids, mask = batch["input_ids"], batch["attention_mask"]
        assert ids.dtype == torch.long and mask.dtype == torch.bool and batch["labels"].dtype == torch.long
        assert (ids[:, 0] == CLS_ID).all()
        lengths = mask.sum(1)
        assert torch.equal(mask, torch.arange(ids.shape[1])[None] < lengths[:, None])  # right padding
        assert ((ids == PAD_ID) == ~mask).all()
        assert lengths.max() == ids.shape[1]  # padded to the batch max, not max_len
        seen += len(ids)
    assert seen == dm.stats["n_train"]


def test_truncation_counted_per_split(write_file):
    train = write_file("train.csv", "text,label\nabcd,0\nabcde,1\nab,0\nabcdefgh,1\n")  # 5+ chars > max_len - 1
    val = write_file("val.csv", "text,label\nabcd,0\nbbbbbb,1\n")
    test = write_file("test.csv", "text,label\nab,0\n")
    files = {"train": str(train), "val": str(val), "test": str(test)}
    dm = TextDataModule(source="files", files=files, max_len=5, probe_size=2)
    stats = dm.stats
    assert (stats["n_train"], stats["n_val"], stats["n_test"]) == (4, 2, 1)
    assert (stats["truncated_train"], stats["truncated_val"], stats["truncated_test"]) == (2, 1, 0)
    assert stats["max_len"] == 5
    lengths = [b["attention_mask"].sum(1).tolist() for b in dm.val_dataloader()]
    assert lengths == [[5, 5]]


def test_vocabulary_comes_from_train_only(write_file):
    train = write_file("train.csv", "text,label\nabc,0\nbca,1\ncab,0\nabcabc,1\n")
    val = write_file("val.csv", "text,label\nab,0\n")
    test = write_file("test.csv", "text,label\nabz,0\nzz,1\n")
    dm = TextDataModule(source="files", files={"train": str(train), "val": str(val), "test": str(test)}, probe_size=1)
    assert set(dm.tokenizer.tokens[3:]) == {"a", "b", "c"}
    ids = next(iter(dm.test_dataloader()))["input_ids"]
    a, b = dm.tokenizer.token_to_id("a"), dm.tokenizer.token_to_id("b")
    assert ids.tolist() == [[CLS_ID, a, b, UNK_ID], [CLS_ID, UNK_ID, UNK_ID, PAD_ID]]
    assert dm.stats["n_test"] == 2 and dm.stats["source_stats"]["test_n_rows"] == 2


def test_setup_is_idempotent():
    dm = _synthetic()
    tokenizer, probe = dm.tokenizer, dm.probe_set()
    dm.setup("test")
    assert dm.tokenizer is tokenizer and dm.probe_set() is probe


def test_probe_set_depends_only_on_data_seed():
    torch.manual_seed(1)
    first = _synthetic(seed=3)
    torch.manual_seed(2)  # a different training seed changes nothing in the data
    second = _synthetic(seed=3)
    other = _synthetic(seed=4)
    assert first.probe_set().digest() == second.probe_set().digest() != other.probe_set().digest()
    for x, y in zip(first.probe_set().batches(5), second.probe_set().batches(5)):
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def test_probe_batches_masks():
    dm = _synthetic(max_len=64)
    probe = dm.probe_set()
    punct = set(dm.tokenizer.punctuation_ids)
    chunks = list(probe.batches(chunk_size=6))
    assert [len(c["input_ids"]) for c in chunks] == [6, 6, 4]
    for chunk, start in zip(chunks, range(0, len(probe), 6)):
        ids, mask = chunk["input_ids"], chunk["attention_mask"]
        assert mask.sum(1).tolist() == probe.lengths[start : start + 6]
        assert chunk["cls_mask"].sum().item() == len(ids) and chunk["cls_mask"][:, 0].all()
        expected_punct = torch.tensor([[int(t) in punct for t in row] for row in ids.tolist()]) & mask
        assert torch.equal(chunk["punct_mask"], expected_punct)
        assert (chunk["punct_mask"].sum(1) == 1).all()  # one final '!' or '.' per synthetic text


def test_probe_comes_from_val_split():
    dm = _synthetic(seed=5)
    val_ids = {tuple(row[m].tolist()) for b in dm.val_dataloader() for row, m in zip(b["input_ids"], b["attention_mask"])}
    assert set(dm.probe_set().input_ids) <= val_ids and len(dm.probe_set()) == 16


def test_default_probe_size_larger_than_val_split_shrinks_with_a_note(caplog):
    """The default probe_size (256) must fit the data it is given: the probe is then the whole val split."""
    dm = TextDataModule(source="synthetic", synthetic=SYN)
    with caplog.at_level("WARNING", logger="headlab.data"):
        dm.setup()
    assert len(dm.probe_set()) == 40  # the val split's size
    assert "data.probe_size=256 is more than the 40 val sequences" in caplog.text


def test_explicit_probe_size_larger_than_val_split():
    dm = TextDataModule(source="synthetic", synthetic=SYN, probe_size=1000)
    with pytest.raises(ConfigError, match="data.probe_size") as info:
        dm.setup()
    assert "1000" in str(info.value) and "[1, 40]" in str(info.value)


def test_empty_val_split_says_the_data_is_too_small():
    from headlab.errors import DataError

    dm = TextDataModule(source="synthetic", synthetic={**SYN, "n": 8}, val_fraction=0.01, test_fraction=0.01)
    with pytest.raises(DataError, match="val split is empty.*too small"):
        dm.setup()


@pytest.mark.parametrize(
    "kwargs, key",
    [
        ({"source": "imdb"}, "data.source"),
        ({"max_len": 1}, "data.max_len"),
        ({"batch_size": 0}, "data.batch_size"),
        ({"probe_size": 0}, "data.probe_size"),
        ({"val_fraction": 1.2}, "data.val_fraction"),
        ({"synthetic": {"n": 10, "colour": "red"}}, "data.synthetic.colour"),
        ({"source": "files", "files": {}}, "data.files.train"),
    ],
)
def test_invalid_config(kwargs, key):
    args = {"source": "synthetic"}
    args.update(kwargs)
    with pytest.raises(ConfigError, match=key):
        TextDataModule(**args)


def test_properties_for_the_model():
    dm = _synthetic()
    assert dm.n_classes == 2 and dm.label_names == ["0", "1"]
    assert dm.vocab_size == dm.tokenizer.vocab_size == len(set("".join(dm.tokenizer.tokens[3:]))) + 3


def test_checkpoint_state_round_trip():
    dm = _synthetic(seed=1)
    state = dm.state_dict()
    _synthetic(seed=1).load_state_dict(state)  # same data: accepted
    with pytest.raises(Exception, match="vocabulary"):
        _synthetic(seed=1, synthetic={**SYN, "letters": "abcdefghxy"}).load_state_dict(state)


def test_lightning_fit_serves_each_epochs_bucket_order_and_saves_state(tmp_path):
    import lightning as L

    served: list[torch.Tensor] = []

    class Tiny(L.LightningModule):
        def __init__(self, vocab_size: int) -> None:
            super().__init__()
            self.emb = torch.nn.EmbeddingBag(vocab_size, 2)

        def training_step(self, batch, batch_idx):
            served.append(batch["input_ids"])
            return torch.nn.functional.cross_entropy(self.emb(batch["input_ids"]), batch["labels"])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    dm = _synthetic(shuffle_seed=0)
    trainer = L.Trainer(
        max_epochs=3, limit_train_batches=2, limit_val_batches=0, logger=False, enable_progress_bar=False,
        enable_model_summary=False, default_root_dir=tmp_path, enable_checkpointing=False,
    )
    trainer.fit(Tiny(dm.vocab_size), datamodule=dm)
    sampler = trainer.train_dataloader.batch_sampler
    dataset = trainer.train_dataloader.dataset
    expected = [collate_batch([dataset[i] for i in b])["input_ids"] for e in range(3) for b in sampler.batches(e)[:2]]
    assert len(served) == 6 and all(torch.equal(x, y) for x, y in zip(served, expected))
    trainer.save_checkpoint(tmp_path / "last.ckpt")
    state = torch.load(tmp_path / "last.ckpt", weights_only=False)["SyntheticDataModule"]  # Lightning: the class name
    assert state["tokens"] == list(dm.tokenizer.tokens) and state["probe_digest"] == dm.probe_set().digest()


def test_each_source_is_its_own_class_and_an_old_config_builds_it():
    """conf/data/<source>.yaml names the source's class; a config saved before (`TextDataModule`, `source`)
    builds the same class, and a `source` another class reads is refused."""
    from headlab.data import SyntheticDataModule

    old = TextDataModule(source="synthetic", synthetic=SYN)
    new = SyntheticDataModule(synthetic=SYN)
    assert type(old) is SyntheticDataModule and old.source == "synthetic"
    assert old.vocab_size == new.vocab_size and old.probe_set().digest() == new.probe_set().digest()
    with pytest.raises(ConfigError, match=r"data\.source='files': expected synthetic"):
        SyntheticDataModule(source="files")
    with pytest.raises(ConfigError, match=r"data\.source='nope': expected one of \['zh_reviews', 'synthetic', 'multidomain', 'en_polarity', 'files'\]"):
        TextDataModule(source="nope")


def test_a_checkpoint_from_before_the_source_classes_restores_the_datamodule_state():
    """Lightning keeps the datamodule's state under its class name; an older checkpoint's "TextDataModule"
    state is handed to the source's class, so such a run still resumes exactly."""
    from types import SimpleNamespace

    from headlab.data import SyntheticDataModule
    from headlab.lit.module import HeadClassifierModule

    dm = SyntheticDataModule(synthetic=SYN)
    checkpoint = {"TextDataModule": dm.state_dict()}
    HeadClassifierModule.on_load_checkpoint(SimpleNamespace(_trainer=SimpleNamespace(datamodule=dm)), checkpoint)
    assert checkpoint["SyntheticDataModule"] is checkpoint["TextDataModule"]
