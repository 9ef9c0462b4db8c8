"""Errors a user can cause by configuration or data, with messages that say what to change.

Every check in headlab raises one of these instead of letting a bare traceback from deep in
torch or pandas reach the user.
"""

from __future__ import annotations

from typing import Any


class HeadlabError(Exception):
    """Base class: a problem the user can fix without reading headlab's source."""


class ConfigError(HeadlabError, ValueError):
    """A configuration value is invalid: names the key, the value and what is allowed."""

    def __init__(self, key: str, value: Any, allowed: str) -> None:
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"invalid config {key}={value!r}: expected {allowed}")


class DataError(HeadlabError, ValueError):
    """Input data cannot be used: names the file (or source) and the problem."""

    def __init__(self, source: Any, problem: str) -> None:
        self.source, self.problem = str(source), problem
        super().__init__(f"{source}: {problem}")
