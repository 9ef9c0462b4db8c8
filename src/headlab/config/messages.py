"""What a user should type, in words: type hints described, and OmegaConf's errors made one line.

Both the composition (OmegaConf rejecting a value against a schema) and the signature check of
third-party targets report through here, so a wrong value reads the same wherever it is caught.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal, Union

from headlab.errors import ConfigError

_SIMPLE = {bool: "true or false", int: "an integer", float: "a number", str: "a string", type(None): "null"}
_PLURAL = {int: "integers", float: "numbers", str: "strings", bool: "booleans"}


def describe(hint: Any) -> str:
    """What to type for a value of type `hint`.

    >>> from typing import Optional
    >>> describe(Optional[int]), describe(Union[bool, Literal["auto"]]), describe(tuple[float, float])
    ('an integer or null', 'one of true, false or auto', 'a list of 2 numbers')
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        choices = [yaml_text(c) for a in args for c in _choices(a)]
        plain = [a for a in args if not _choices(a)]
        typed = [a for a in plain if not _describable(a)]
        words = [describe(a) for a in plain if _describable(a)] or [describe(a) for a in typed]
        words = list(dict.fromkeys(words + choices))
        text = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
        return f"one of {text}" if len(choices) > 2 and len(words) == len(set(choices)) else text
    if origin is Literal:
        return "one of " + ", ".join(dict.fromkeys(yaml_text(a) for a in args))
    if hint in _SIMPLE:
        return _SIMPLE[hint]
    container = origin or hint
    if container is tuple and args and args[-1] is not Ellipsis:
        return (f"a list of {len(args)} {_plural(args[0])}" if len(set(args)) == 1
                else "a list [" + ", ".join(describe(a) for a in args) + "]")
    if is_abstract(container, Mapping):
        return "a mapping"
    if is_abstract(container, Iterable) and container is not str:
        return f"a list of {_plural(args[0])}" if args else "a list"
    if inspect.isclass(hint) and issubclass(hint, os.PathLike):
        return "a path"
    if dataclasses.is_dataclass(hint):
        return "a mapping of " + ", ".join(f.name for f in dataclasses.fields(hint) if not f.name.startswith("_"))
    return f"a {getattr(hint, '__name__', hint)}"


def is_abstract(container: Any, kind: type) -> bool:
    """A builtin or `collections.abc` container of `kind` (a torch Tensor is iterable, but no list)."""
    return (inspect.isclass(container) and issubclass(container, kind)
            and container.__module__ in ("builtins", "collections.abc", "typing"))


def _choices(hint: Any) -> tuple[Any, ...]:
    """The values a Literal, bool or None allows (empty for any other type)."""
    if typing.get_origin(hint) is Literal:
        return typing.get_args(hint)
    return {bool: (True, False), type(None): (None,)}.get(hint, ())


def _describable(hint: Any) -> bool:
    """Can the user type it (a number, text, a list, a path), rather than an object built in code?"""
    container = typing.get_origin(hint) or hint
    return hint in (bool, int, float, str) or typing.get_origin(hint) is Literal or (
        inspect.isclass(container) and (is_abstract(container, Iterable) or issubclass(container, os.PathLike)))


def _plural(hint: Any) -> str:
    if typing.get_origin(hint) in (Union, types.UnionType):  # float | Tensor -> numbers
        kinds = {_PLURAL[a] for a in typing.get_args(hint) if a in _PLURAL}
        return kinds.pop() if len(kinds) == 1 else "values"
    return _PLURAL.get(hint, "values")


def yaml_text(value: Any) -> str:
    """A value as the user types it on the command line: true, null, [0.9, 0.98]."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_text(v) for v in value) + "]"
    return str(value)


def first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0].strip() if text else type(err).__name__


def schema_fields(schema: type) -> dict[str, Any]:
    """A schema's user-facing fields (not `_target_`) and their types."""
    hints = typing.get_type_hints(schema)
    return {f.name: hints[f.name] for f in dataclasses.fields(schema) if not f.name.startswith("_")}


def unknown_key(path: str, value: Any, known: list[str], owner: str | None = None) -> ConfigError:
    """`trainer.max_epoch` -> 'a parameter of ...Trainer (did you mean max_epochs?)'."""
    import difflib

    close = difflib.get_close_matches(path.rsplit(".", 1)[-1], known, n=1)
    hint = f"did you mean {close[0]}?" if close else f"one of {', '.join(known)}"
    where = f"a parameter of {owner}" if owner else f"a key of {path.rpartition('.')[0] or 'the config'}"
    return ConfigError(path, value, f"{where} ({hint})")


def as_typed(node: Any, key: Any) -> Any:
    """The value at `key` of an OmegaConf node as the user typed it (an interpolation unresolved: `${optim.lr}`),
    the value a message names."""
    return node._get_node(key)._value()  # noqa: SLF001 - OmegaConf has no public reader of the unresolved value
