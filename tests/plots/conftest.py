"""Shared checks for the plot tests; matplotlib's cache goes to a temp folder, never $HOME."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# Read once, when matplotlib is first imported: set it before any test module imports it.
os.environ.setdefault("MPLCONFIGDIR", str(Path(tempfile.gettempdir()) / f"headlab-tests-mplconfig-{os.getuid()}"))

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _mplconfig_for_children(monkeypatch: pytest.MonkeyPatch) -> None:
    """Subprocesses started by a test inherit the same matplotlib config folder."""
    monkeypatch.setenv("MPLCONFIGDIR", os.environ["MPLCONFIGDIR"])


@pytest.fixture
def read_png():
    """Check `path` is a real, non-blank PNG of at least `min_side` pixels; return its pixels."""
    from matplotlib import image

    def check(path: Path, min_side: int = 150):
        path = Path(path)
        assert path.read_bytes()[:8] == PNG_SIGNATURE
        pixels = image.imread(path)
        assert pixels.ndim == 3 and min(pixels.shape[:2]) >= min_side, pixels.shape
        assert pixels[..., :3].std() > 0.01  # something was drawn
        return pixels

    return check
