"""The running-sum state every streaming analysis accumulator shares."""

from __future__ import annotations

from typing import Any

from headlab.errors import DataError


class SumAccumulator:
    """Adds per-chunk sums (any object supporting `+`), so memory never grows with the probe."""

    def __init__(self) -> None:
        self._sums: Any = None

    def _add(self, sums: Any) -> None:
        self._sums = sums if self._sums is None else self._sums + sums

    def _total(self) -> Any:
        if self._sums is None:
            raise DataError(type(self).__name__, "compute() called before any update()")
        return self._sums

    def reset(self) -> None:
        self._sums = None
