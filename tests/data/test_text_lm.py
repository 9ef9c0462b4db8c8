"""Character LMs on real text: the probe draws from frequent characters; data=files_lm reads a text column."""

from __future__ import annotations

import json

import pytest
import torch

from headlab.data.lm_datamodule import FilesLMDataModule, frequent_ids
from headlab.data.tokenizer import CLS_ID, SPECIAL_TOKENS
from headlab.errors import ConfigError, DataError

TINY = dict(max_len=17, probe_half_len=4, probe_max_gap=4, probe_size=6, min_freq=1, val_fraction=0.2, test_fraction=0.2)


def test_frequent_ids_are_the_k_most_frequent_non_special_ids_ties_to_the_smaller():
    # counts: id 0 (PAD) x9, 1 (CLS) x9, 3 x1, 4 x5, 5 x3, 6 x3, 7 x0
    windows = torch.tensor([0] * 9 + [1] * 9 + [3] + [4] * 5 + [5] * 3 + [6] * 3)
    assert frequent_ids(windows, 8, 2).tolist() == [4, 5]          # 6 ties with 5 and loses
    assert frequent_ids(windows, 8, 3).tolist() == [4, 5, 6]
    assert frequent_ids(windows, 8, None).tolist() == [3, 4, 5, 6]  # every id seen, never a special
    assert frequent_ids(windows, 8, 100).tolist() == [3, 4, 5, 6]
    with pytest.raises(DataError, match="at least 2"):
        frequent_ids(torch.tensor([0, 1, 2, 5, 5]), 8, None)


def _texts(n: int) -> list[str]:
    common, rare = "abcdefgh", "XYZQRSTUVW"
    return [common[i % 8:] + common[: i % 8] + rare[i % 10] for i in range(n)]


def _csv(path, header: str, rows: list[str]):
    path.write_text(header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return str(path)


def test_files_lm_reads_a_text_only_csv_and_its_probe_avoids_rare_characters(tmp_path):
    path = _csv(tmp_path / "t.csv", "text", _texts(60))
    data = FilesLMDataModule(files={"train": path}, probe_vocab=8, **TINY)
    assert data.vocab_size == len(SPECIAL_TOKENS) + 18
    assert data.splits["train"].shape[1] == 17 and data.splits["train"].shape[0] >= 2
    assert (data.splits["train"] == CLS_ID).any()
    common = {data.tokenizer.token_to_id(c) for c in "abcdefgh"}
    assert set(data.probe_ids.tolist()) == common
    assert (data.probe[:, 0] == CLS_ID).all() and set(data.probe[:, 1:].unique().tolist()) <= common
    assert data.stats["source"] == "files_lm" and data.stats["probe_vocab"] == 8
    everything = FilesLMDataModule(files={"train": path}, probe_vocab=None, **TINY)
    assert len(everything.probe_ids) == 18  # null: every character seen, the rare ones too


def test_files_lm_ignores_a_label_column_and_uses_given_val_and_test(tmp_path):
    train = tmp_path / "train.jsonl"
    train.write_text("\n".join(json.dumps({"text": t, "label": i % 2}) for i, t in enumerate(_texts(40))), encoding="utf-8")
    val = _csv(tmp_path / "val.csv", "text,label", [f"{t},x" for t in _texts(20)])
    test = _csv(tmp_path / "test.csv", "text", _texts(20))
    data = FilesLMDataModule(files={"train": str(train), "val": val, "test": test}, **TINY)
    assert data.splits["train"].numel() == (40 * 10) // 17 * 17  # the whole train file, no rows split off
    assert data.splits["val"].numel() == (20 * 10) // 17 * 17


def test_files_lm_without_usable_text_is_one_data_error_naming_the_file(tmp_path):
    no_column = _csv(tmp_path / "a.csv", "review,label", ["good,1", "bad,0"])
    with pytest.raises(DataError, match=r"a\.csv: missing column 'text' \(columns found: \['review', 'label'\]\)"):
        FilesLMDataModule(files={"train": no_column}, **TINY)
    blank = _csv(tmp_path / "b.csv", "text,label", [" ,1", ",0"])
    with pytest.raises(DataError, match=r"b\.csv: no usable text: all 2 rows have a blank 'text'"):
        FilesLMDataModule(files={"train": blank}, **TINY)
    numbers = tmp_path / "c.jsonl"
    numbers.write_text('{"text": 3}\n{"text": 4}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"no usable text: .*\(2 are not strings\)"):
        FilesLMDataModule(files={"train": str(numbers)}, **TINY)


@pytest.mark.parametrize("kwargs, key", [({"files": {}}, "data.files.train"),
                                         ({"files": {"train": "x.csv", "dev": "y.csv"}}, "data.files.dev"),
                                         ({"files": {"train": "x.csv"}, "probe_vocab": 1}, "data.probe_vocab"),
                                         ({"files": {"train": "x.csv"}, "probe_vocab": "all"}, "data.probe_vocab")])
def test_bad_keys_are_one_config_error_naming_the_key(kwargs, key):
    with pytest.raises(ConfigError, match=rf"invalid config {key}="):
        FilesLMDataModule(**{**TINY, **kwargs})
