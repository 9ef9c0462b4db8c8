"""Shared fixtures for the data tests: the real reviews (loaded once) and a file writer."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from headlab.data import load_zh_reviews


@pytest.fixture(scope="module")
def zh_reviews():
    return load_zh_reviews()


@pytest.fixture
def write_file(tmp_path: Path) -> Callable[..., Path]:
    """write_file(name, content: str | bytes) -> path inside tmp_path."""

    def write(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        return path

    return write
