"""The user's own labelled texts: CSV or JSON lines with columns `text`, `label`, optional `domain`
(the text and label columns may have other names: `data.files.text_column`, `data.files.label_column`).

Every problem a file can have is reported as a `DataError` naming the file and what to change,
because this is where user data first meets headlab. Labels may be strings or integers; the
sorted distinct values become classes 0..C-1 (integers sort numerically, so "10" follows "9").
Blank texts are dropped and counted, not fatal: exports often end with empty rows (fully empty
lines are skipped by the CSV reader and in JSON lines). `domain` is a free-form tag, never an
error: a row without one gets "" and is counted in `domain_missing`; `n_domains` counts the
distinct tags; in a separate val/test file, rows whose domain does not occur in the train file
are kept and counted in `unknown_domain` (summary.json: `val_unknown_domain`, `test_unknown_domain`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headlab.data.labeled import LabeledTexts
from headlab.errors import ConfigError, DataError

SUFFIXES = (".csv", ".jsonl", ".json")
TEXT, LABEL, DOMAIN = "text", "label", "domain"


@dataclass
class _Rows:
    """What one file holds before labels become integers."""

    texts: list[str]
    labels: list[str | int]
    domains: list[str] | None
    n_rows: int
    blank: int


def load_files(path: str | os.PathLike, text_column: str = TEXT, label_column: str = LABEL) -> LabeledTexts:
    """One file, its labels mapped to 0..C-1 in sorted order; needs at least two classes."""
    return _labeled(_read_rows(Path(path), text_column, label_column), path, train_names=None, label_column=label_column)


def load_file_splits(
    train: str | os.PathLike, val: str | os.PathLike | None = None, test: str | os.PathLike | None = None,
    text_column: str = TEXT, label_column: str = LABEL,
) -> dict[str, LabeledTexts]:
    """Train file plus optional val/test files, all mapped with the TRAIN file's classes. The text and
    label are read from the columns (CSV header names, JSON keys) `text_column` and `label_column`."""
    _check_column_names(text_column, label_column)
    out = {"train": load_files(train, text_column, label_column)}
    train_domains = set(out["train"].domains or [])
    for split, path in (("val", val), ("test", test)):
        if path is not None:
            out[split] = _labeled(_read_rows(Path(path), text_column, label_column), path,
                                  train_names=out["train"].label_names, train_path=train, label_column=label_column)
            if out[split].domains is not None:
                out[split].stats["unknown_domain"] = sum(d not in train_domains for d in out[split].domains)
    return out


def _check_column_names(*names: object) -> None:
    for key, name in zip(("data.files.text_column", "data.files.label_column"), names):
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(key, name, "a column name of the file (a CSV header, a JSON key)")
    if names[0] == names[1]:
        raise ConfigError("data.files.label_column", names[1], "a column other than data.files.text_column")


def _labeled(
    rows: _Rows, path: str | os.PathLike, train_names: list[str] | None, train_path: str | os.PathLike | None = None,
    label_column: str = LABEL,
) -> LabeledTexts:
    """Map labels to ints: by this file's own sorted values, or by the train file's classes."""
    numeric = None if train_names is None else all(isinstance(_label_key(n), int) for n in train_names)
    keys, numeric = _label_keys(rows.labels, numeric)
    if train_names is None:
        names = sorted(set(keys))
        if len(names) < 2:
            raise DataError(path, f"only one class ({names[0]!r}) in column {label_column!r}: a classifier needs at least 2")
    else:
        names = [_label_key(n) if numeric else n for n in train_names]
        unknown = sorted({str(k) for k in keys} - {str(n) for n in names})
        if unknown:
            raise DataError(path, f"labels {unknown[:10]} do not occur in the train file {os.fspath(train_path)}")
    index = {name: i for i, name in enumerate(names)}
    stats = {"n_rows": rows.n_rows, "blank": rows.blank, "n_examples": len(rows.texts)}
    if rows.domains is not None:
        stats.update(n_domains=len(set(rows.domains) - {""}), domain_missing=sum(d == "" for d in rows.domains))
    return LabeledTexts(rows.texts, [index[k] for k in keys], [str(n) for n in names], rows.domains, stats)


def load_texts(path: str | os.PathLike, text_column: str = TEXT) -> list[str]:
    """The non-blank `text` (`text_column`) values of one CSV / JSON lines file, stripped, in file order: what a
    character LM (`data=files_lm`) trains on. Other columns (`label`, `domain`) are ignored; a file
    without a `text` column, or whose texts are all blank or not strings, is a DataError."""
    path = Path(path)
    records = _read_records(path, required=(text_column,))
    texts, not_text = [], 0
    for _, row in records:
        text = row.get(text_column)
        if isinstance(text, str) and text.strip():
            texts.append(text.strip())
        elif text is not None and not isinstance(text, str):
            not_text += 1
    if not texts:
        detail = f" ({not_text} are not strings)" if not_text else ""
        raise DataError(path, f"no usable text: all {len(records)} rows have a blank {text_column!r}{detail}; a language model needs text")
    return texts


def _read_records(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict]]:
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise DataError(path, f"unsupported file type {path.suffix!r}: use one of {list(SUFFIXES)} (CSV or JSON lines)")
    if not path.is_file():
        raise DataError(path, "file not found" if not path.exists() else "not a regular file")
    content = _decode_utf8(path)
    if not content.strip():
        raise DataError(path, "the file is empty")
    records = _csv_records(content, path, required) if suffix == ".csv" else _json_records(content, path, required)
    if not records:
        raise DataError(path, "no data rows (only a header?)")
    return records


def _read_rows(path: Path, text_column: str = TEXT, label_column: str = LABEL) -> _Rows:
    return _collect(_read_records(path, required=(text_column, label_column)), path, text_column, label_column)


def _decode_utf8(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        problem = f"not valid UTF-8 at byte offset {err.start} (line {line}); headlab requires UTF-8, re-save the file as UTF-8"
        raise DataError(path, problem) from None


# No length limit on a field: a long text is truncated to data.max_len when encoded (docs/data.md),
# never refused by the csv module's 131,072-character default.
_NO_FIELD_LIMIT = 2**31 - 1


def _csv_records(content: str, path: Path, required: tuple[str, ...] = (TEXT, LABEL)) -> list[tuple[int, dict]]:
    """The rows of a CSV, each a problem of the CSV itself (an unclosed quote, a row with more or fewer
    fields than the header) reported with its line, before any later check misreads its effects."""
    csv.field_size_limit(max(csv.field_size_limit(), _NO_FIELD_LIMIT))
    reader = csv.DictReader(io.StringIO(content, newline=""), strict=True)
    header = [c.strip() for c in reader.fieldnames or []]
    _check_columns(header, path, required)
    records, last = [], reader.line_num
    try:
        for row in reader:
            if None in row or None in row.values():
                n = len(header) + len(row.get(None) or []) - sum(v is None for k, v in row.items() if k is not None)
                raise DataError(path, f"malformed CSV at line {last + 1}: {n} field(s) where the header has {len(header)} "
                                f"({', '.join(header)}); quote a text that holds commas: \"a, b\",label")
            records.append((reader.line_num, {(k or "").strip(): v for k, v in row.items()}))
            last = reader.line_num
    except csv.Error as err:
        if "unexpected end of data" in str(err):
            raise DataError(path, f"malformed CSV at line {last + 1}: a quoted field opens there and never closes "
                            "(the rest of the file would be one text); double a quote inside a quoted text: "
                            '"say ""hi"""') from None
        raise DataError(path, f"malformed CSV at line {last + 1}: {err}") from None
    return records


def _json_records(content: str, path: Path, required: tuple[str, ...] = (TEXT, LABEL)) -> list[tuple[int, dict]]:
    """JSON lines; a `.json` file holding one array of objects is accepted too."""
    if path.suffix.lower() == ".json" and content.lstrip().startswith("["):
        try:
            items = [(i + 1, obj) for i, obj in enumerate(json.loads(content))]
        except json.JSONDecodeError as err:
            raise DataError(path, f"invalid JSON at line {err.lineno}: {err.msg}") from None
        where = "item"
    else:
        items = []
        for number, line in enumerate(content.splitlines(), start=1):
            if line.strip():
                try:
                    items.append((number, json.loads(line)))
                except json.JSONDecodeError as err:
                    raise DataError(path, f"invalid JSON on line {number}: {err.msg}") from None
        where = "line"
    bad = next((n for n, obj in items if not isinstance(obj, dict)), None)
    if bad is not None:
        raise DataError(path, f"{where} {bad} is not a JSON object with keys {' and '.join(map(repr, required))}")
    _check_columns(sorted({k for _, obj in items for k in obj}), path, required)
    return items


def _check_columns(found: list[str], path: Path, required: tuple[str, ...] = (TEXT, LABEL)) -> None:
    for column in required:
        if column not in found:
            hint = "" if column == DOMAIN else (f"; name yours with data.files.{'text' if column in required[:1] else 'label'}"
                                                f"_column=NAME")
            raise DataError(path, f"missing column {column!r} (columns found: {found}){hint}")


def _collect(records: list[tuple[int, dict]], path: Path, text_column: str = TEXT, label_column: str = LABEL) -> _Rows:
    has_domain = any(DOMAIN in row for _, row in records)
    rows = _Rows([], [], [] if has_domain else None, n_rows=len(records), blank=0)
    for line, row in records:
        text = row.get(text_column)
        if text is None or (isinstance(text, str) and not text.strip()):
            rows.blank += 1
            continue
        if not isinstance(text, str):
            raise DataError(path, f"line {line}: {text_column!r} must be a string, got {type(text).__name__}")
        rows.texts.append(text.strip())
        rows.labels.append(_label_value(row.get(label_column), line, path, label_column))
        if rows.domains is not None:
            domain = row.get(DOMAIN)
            rows.domains.append("" if domain is None else str(domain).strip())
    if not rows.texts:
        raise DataError(path, f"all {rows.n_rows} rows have a blank {text_column!r}")
    return rows


def _label_value(value: object, line: int, path: Path, label_column: str = LABEL) -> str | int:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataError(path, f"line {line}: {label_column!r} must be a string or an integer, got {value!r}")
    if isinstance(value, str):
        value = value.strip()
        if not value:
            raise DataError(path, f"line {line}: empty {label_column!r}")
    return value


def _label_key(value: str | int) -> str | int:
    """An integer, or a string spelling one, as an int (so 10 sorts after 9); else the text."""
    if isinstance(value, int):
        return value
    try:
        return int(value)
    except ValueError:
        return value


def _label_keys(labels: list[str | int], numeric: bool | None) -> tuple[list[str | int], bool]:
    """Numeric keys when every label is an integer (or `numeric` says so), else strings."""
    ints = [_label_key(v) for v in labels]
    if numeric is None:
        numeric = all(isinstance(k, int) for k in ints)
    return (ints if numeric else [str(v) for v in labels]), numeric


FILE_KEYS = ("train", "val", "test")  # the keys of `data.files` that name files


def absolute_file_paths(files: Any, base: str | os.PathLike) -> dict[str, str]:
    """The `data.files` paths that are relative, as absolute paths against `base` (the directory the run
    started in): `{key: absolute}` for each one that changes. Symbolic links are kept as written."""
    out = {}
    for key in FILE_KEYS:
        absolute = absolute_path(files.get(key) if files is not None else None, base)
        if absolute is not None:
            out[key] = absolute
    return out


def absolute_path(value: Any, base: str | os.PathLike) -> str | None:
    """A relative path (or one starting with ~) made absolute against `base`; None when `value` is not a
    path string or is absolute already."""
    if isinstance(value, str) and value and not os.path.isabs(os.path.expanduser(value)):
        return os.path.normpath(os.path.join(os.fspath(base), value))
    if isinstance(value, str) and value.startswith("~"):
        return os.path.expanduser(value)
    return None


def file_sha256(path: str | os.PathLike) -> str:
    """The hex sha256 of a file's bytes: what a run records of each data file (summary.json
    `data.files_sha256`), so a tool that rebuilds its splits can tell the file changed."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
