"""Console entry points, one module each (pyproject.toml's scripts); here the one short form they share."""

from __future__ import annotations

from collections.abc import Sequence


def positional_arg(args: Sequence[str], key: str) -> list[str]:
    """The one short form: a leading argument that is neither an override nor a flag is `key=ARG`, so
    `headlab-view RUN` is `headlab-view path=RUN`; everything else is Hydra's own grammar.

    >>> positional_arg(["my runs/a", "checkpoint=all"], "run_dir"), positional_arg(["--cfg", "job"], "run_dir")
    (["run_dir='my runs/a'", 'checkpoint=all'], ['--cfg', 'job'])
    """
    if args and not args[0].startswith("-") and "=" not in args[0]:
        return [f"{key}={quote(args[0])}", *args[1:]]
    return list(args)


_PLAIN = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:~+@%")


def quote(value: str) -> str:
    """A path as a value Hydra's override grammar reads back unchanged.

    >>> quote("logs/runs/2026-12-01_10-00-00_000001"), quote("my runs/a,b")
    ('logs/runs/2026-12-01_10-00-00_000001', "'my runs/a,b'")
    """
    if value and set(value) <= _PLAIN:
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
