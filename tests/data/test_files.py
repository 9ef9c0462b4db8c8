"""User files: every bad file gets a DataError naming the file and the problem; good ones load."""

from __future__ import annotations

import json

import pytest

from headlab.data import load_file_splits, load_files
from headlab.errors import DataError

GOOD_CSV = "text,label,domain\n好评，很好,pos,books\nbad one,neg,dvd\n  ,neg,dvd\n一般,neutral,books\n"


def _error(path) -> str:
    with pytest.raises(DataError) as info:
        load_files(path)
    message = str(info.value)
    assert path.name in message
    return message


def test_missing_file(tmp_path):
    assert "not found" in _error(tmp_path / "nope.csv")


def test_unsupported_suffix(write_file):
    message = _error(write_file("data.txt", "text,label\na,1\n"))
    assert "unsupported" in message and ".csv" in message and ".jsonl" in message


@pytest.mark.parametrize("name, content", [("e.csv", ""), ("e.jsonl", "\n  \n")])
def test_empty_file(write_file, name, content):
    assert "empty" in _error(write_file(name, content))


def test_header_only(write_file):
    assert "no data rows" in _error(write_file("h.csv", "text,label\n"))


@pytest.mark.parametrize(
    "name, content, missing",
    [
        ("m.csv", "review,label\nok,1\nno,0\n", "text"),
        ("m.jsonl", '{"text": "ok", "y": 1}\n{"text": "no", "y": 0}\n', "label"),
    ],
)
def test_missing_column_names_it_and_lists_found(write_file, name, content, missing):
    message = _error(write_file(name, content))
    assert f"missing column '{missing}'" in message
    found = ["review", "label"] if name.endswith(".csv") else ["text", "y"]
    assert all(col in message for col in found)


def test_single_class(write_file):
    message = _error(write_file("one.csv", "text,label\na,pos\nb,pos\n"))
    assert "one class" in message and "pos" in message


def test_non_utf8_reports_offset_and_line(write_file):
    content = "text,label\nfine,1\n".encode() + "坏".encode("gbk") + b",0\n"
    message = _error(write_file("gbk.csv", content))
    offset = len("text,label\nfine,1\n".encode())
    assert "UTF-8" in message and f"byte offset {offset}" in message and "line 3" in message


def test_invalid_json_line(write_file):
    message = _error(write_file("bad.jsonl", '{"text": "a", "label": 1}\n{"text": oops}\n'))
    assert "line 2" in message


def test_good_csv_maps_sorted_string_labels_and_drops_blank(write_file):
    data = load_files(write_file("good.csv", GOOD_CSV))
    assert data.label_names == ["neg", "neutral", "pos"]
    assert data.texts == ["好评，很好", "bad one", "一般"]
    assert data.labels == [2, 0, 1]
    assert data.domains == ["books", "dvd", "books"]
    assert data.stats == {"n_rows": 4, "blank": 1, "n_examples": 3, "n_domains": 2, "domain_missing": 0}


def test_good_jsonl_with_integer_labels_sorted_numerically(write_file):
    rows = [{"text": "a", "label": 10}, {"text": "b", "label": 9}, {"text": "c", "label": 10}]
    data = load_files(write_file("good.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n"))
    assert data.label_names == ["9", "10"]
    assert data.labels == [1, 0, 1]
    assert data.domains is None


def test_json_array_file(write_file):
    rows = [{"text": "a", "label": "x"}, {"text": "b", "label": "y"}]
    data = load_files(write_file("arr.json", json.dumps(rows)))
    assert data.labels == [0, 1] and data.label_names == ["x", "y"]


def test_separate_val_test_use_train_classes(write_file):
    train = write_file("train.csv", "text,label\na,pos\nb,neg\nc,pos\n")
    val = write_file("val.jsonl", '{"text": "d", "label": "pos"}\n')
    test = write_file("test.csv", "text,label\ne,neg\n")  # one class is fine outside train
    parts = load_file_splits(train, val, test)
    assert parts["val"].labels == [1] and parts["test"].labels == [0]
    assert parts["val"].label_names == parts["train"].label_names == ["neg", "pos"]


def test_val_label_unknown_to_train(write_file):
    train = write_file("train.csv", "text,label\na,pos\nb,neg\n")
    val = write_file("val.csv", "text,label\nd,meh\n")
    with pytest.raises(DataError, match=r"val\.csv.*'meh'"):
        load_file_splits(train, val)


def test_empty_lines_are_skipped_and_blank_texts_counted(write_file):
    csv_data = load_files(write_file("gaps.csv", "text,label\n\nab,x\n\n\n   ,y\ncd,y\n\n"))
    assert csv_data.texts == ["ab", "cd"] and csv_data.stats["blank"] == 1 and csv_data.stats["n_rows"] == 3
    jsonl = load_files(write_file("gaps.jsonl", '\n{"text": "ab", "label": 0}\n\n  \n{"text": "", "label": 1}\n{"text": "c", "label": 1}\n'))
    assert jsonl.texts == ["ab", "c"] and jsonl.stats["blank"] == 1


def test_all_blank_texts_is_an_error(write_file):
    assert "blank" in _error(write_file("blank.csv", "text,label\n ,a\n\t,b\n"))


def test_missing_domain_is_counted_not_fatal(write_file):
    data = load_files(write_file("dom.jsonl", '{"text": "a", "label": 0, "domain": "books"}\n{"text": "b", "label": 1}\n'))
    assert data.domains == ["books", ""]
    assert data.stats["n_domains"] == 1 and data.stats["domain_missing"] == 1


def test_val_domain_unknown_to_train_is_kept_and_counted(write_file):
    train = write_file("train.csv", "text,label,domain\na,0,books\nb,1,dvd\n")
    val = write_file("val.csv", "text,label,domain\nc,0,books\nd,1,phones\ne,1,toys\n")
    splits = load_file_splits(train, val)
    assert splits["val"].domains == ["books", "phones", "toys"]
    assert splits["val"].stats["unknown_domain"] == 2
    assert "unknown_domain" not in splits["train"].stats



_ROWS = "".join(f"text {i},{'ab'[i % 2]}\n" for i in range(40))


def test_an_unclosed_quote_is_a_csv_problem_on_its_line(write_file):
    path = write_file("quote.csv", "text,label\n" + _ROWS[:_ROWS.index("text 20")] + '"never closed,a\n'
                      + _ROWS[_ROWS.index("text 20"):])
    message = _error(path)  # on the parent commit: "line 62: 'label' must be ... got None", the rest one text
    assert "malformed CSV at line 22" in message and "never closes" in message


def test_a_row_with_more_fields_than_the_header_is_a_csv_problem(write_file):
    message = _error(write_file("extra.csv", "text,label\n" + _ROWS[:30] + "a, b, unquoted,a\n"))  # silently kept
    assert "malformed CSV at line" in message and "4 field(s) where the header has 2 (text, label)" in message


def test_a_long_field_is_read_whole_and_truncated_when_encoded(write_file):
    from headlab.data import TextDataModule

    long_text = "长" * 200_000  # above the csv module's default 131,072-character field limit
    path = write_file("long.csv", "text,label\n" + _ROWS + f"{long_text},a\n")
    assert long_text in load_files(path).texts  # on the parent commit: "field larger than field limit (131072)"
    dm = TextDataModule(source="files", files={"train": str(path)}, max_len=16, val_fraction=0.25, test_fraction=0.25)
    dm.setup()
    assert max(len(ids) for split in dm._data().splits.values() for ids in split.input_ids) <= 16


def test_data_too_small_to_split_names_the_split_sizes(write_file):
    from headlab.data import TextDataModule

    dm = TextDataModule(source="files", files={"train": str(write_file("small.csv", "text,label\nx,a\ny,b\nz,a\n"))})
    with pytest.raises(DataError) as info:
        dm.setup()  # before 756cf99: "expected an integer in [1, 0]" for data.probe_size
    message = str(info.value)
    assert "val split is empty (splits: 3 train, 0 val, 0 test rows" in message and "too small" in message
    assert "probe_size" not in message


def test_a_split_of_unique_labels_says_why_it_cannot_be_made(write_file):
    """Every label once (an id column read as the label): the stratified split leaves val empty, and says so."""
    from headlab.data import TextDataModule

    rows = "".join(f"text number {i},L{i}\n" for i in range(40))
    dm = TextDataModule(source="files", files={"train": str(write_file("ids.csv", "text,label\n" + rows))})
    with pytest.raises(DataError) as info:
        dm.setup()  # before: "the data is too small to split" for 40 rows
    assert "each of the 40 labels has at most 1 row(s)" in str(info.value) and "every label is unique" in str(info.value)
