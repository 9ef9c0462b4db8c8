"""Nodes with a `_target_` but no schema (Lightning's Trainer, loggers and callbacks, torch's
optimisers, a user's own class) checked against the target's signature: every key a parameter,
every value of the declared type. Their schema is the signature, so it never drifts from the
installed version.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import os
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Union

from headlab.config.messages import describe, first_line, is_abstract, unknown_key, yaml_text
from headlab.errors import ConfigError

# Targets whose **kwargs go to another function, which then types the extra keys.
_KWARGS_GO_TO = {"lightning.pytorch.loggers.wandb.WandbLogger": "wandb.init"}
# Stands for a value that only resolves inside a Hydra run (`${hydra:runtime.output_dir}`).
UNRESOLVED = type("_Unresolved", (), {"__repr__": lambda self: "<resolved by Hydra>"})()


def check_target(path: str, node: Mapping[str, Any]) -> None:
    """Every key of `node` must be a parameter of its `_target_`, with a value of its declared type."""
    target = locate(f"{path}._target_", node["_target_"])
    params, var_kwargs = parameters(target)
    forwarded = _KWARGS_GO_TO.get(qualname(target))
    if forwarded and var_kwargs:
        extra, var_kwargs = parameters(locate(f"{path}._target_", forwarded))
        params = {**extra, **params}
    _check_keys(path, node, params, var_kwargs, qualname(target))


def _check_keys(path: str, node: Mapping[str, Any], params: dict[str, Param], var_kwargs: bool, owner: str) -> None:
    for key, value in node.items():
        if key.startswith("_") and key.endswith("_"):
            continue  # _target_, _partial_, _recursive_, _convert_, _args_
        full = f"{path}.{key}"
        if key not in params:
            if not var_kwargs:
                raise unknown_key(full, value, list(params), owner)
            continue
        check_value(full, value, params[key].hint, params[key].default)


def check_value(path: str, value: Any, hint: Any, default: Any = None) -> None:
    """ConfigError unless `value` (plain YAML data) fits `hint`."""
    if value is UNRESOLVED:
        return
    if isinstance(value, dict) and "_target_" in value:
        check_target(path, value)
        return
    if _matches(value, hint, path) is False:
        example = f", e.g. {yaml_text(default)}" if default not in (None, inspect.Parameter.empty, (), []) else ""
        raise ConfigError(path, value, f"{describe(hint)}{example}")


@dataclasses.dataclass(frozen=True)
class Param:
    hint: Any
    default: Any


def parameters(target: Any) -> tuple[dict[str, Param], bool]:
    """`target`'s keyword parameters with resolved type hints, and whether it takes **kwargs."""
    signature = inspect.signature(target)
    hints = _type_hints(target)
    params = {name: Param(hints.get(name, Any), p.default) for name, p in signature.parameters.items()
              if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return params, any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())


def _type_hints(target: Any) -> dict[str, Any]:
    function = target.__init__ if inspect.isclass(target) else target
    try:
        return typing.get_type_hints(function)
    except Exception:  # an annotation naming a type imported only for checkers: judge the others alone
        hints = {}
        module_globals = getattr(function, "__globals__", {})
        for name, annotation in getattr(function, "__annotations__", {}).items():
            try:
                hints[name] = eval(annotation, module_globals) if isinstance(annotation, str) else annotation  # noqa: S307
            except Exception:
                hints[name] = Any
        return hints


def _matches(value: Any, hint: Any, path: str) -> bool | None:
    """Does `value` fit `hint`? None: the hint cannot be judged, so accept."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is inspect.Parameter.empty or isinstance(hint, (str, typing.ForwardRef, typing.TypeVar)):
        return None
    if hint is type(None) or hint is None:
        return value is None
    if origin in (Union, types.UnionType):
        verdicts = [_matches(value, arg, path) for arg in args]
        return True if True in verdicts else (None if None in verdicts else False)
    if origin is Literal:
        return any(type(value) is type(choice) and value == choice for choice in args)
    if hint in (bool, int, float, str):
        kinds = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}[hint]
        return isinstance(value, kinds) and (hint is bool or not isinstance(value, bool))
    container = origin or hint
    if container is tuple and args and args[-1] is not Ellipsis:
        return isinstance(value, list) and len(value) == len(args) and all(
            _matches(v, a, path) is not False for v, a in zip(value, args))
    if is_abstract(container, Mapping):
        return isinstance(value, dict) and (len(args) < 2 or all(_matches(v, args[1], path) is not False
                                                                  for v in value.values()))
    if is_abstract(container, Iterable) and container is not str:
        if isinstance(value, str) and issubclass(container, str | Sequence):
            return None if not args else args[0] is str  # a string is a sequence of strings
        return isinstance(value, list) and (not args or all(_matches(v, args[0], path) is not False for v in value))
    return _matches_class(value, hint, path)


def _matches_class(value: Any, hint: Any, path: str) -> bool | None:
    if not inspect.isclass(hint):
        return None  # Callable, Protocol, NewType, ...: not judged
    if isinstance(value, hint):
        return True
    if issubclass(hint, os.PathLike):
        return isinstance(value, str)
    if issubclass(hint, enum.Enum):
        return isinstance(value, str) or value in [m.value for m in hint]
    if isinstance(value, dict) and dataclasses.is_dataclass(hint):
        fields = {f.name: Param(typing.get_type_hints(hint).get(f.name, Any), f.default) for f in dataclasses.fields(hint)}
        _check_keys(path, value, fields, False, qualname(hint))  # a dataclass given as a mapping: its fields
        return True
    return False


def locate(path: str, name: str) -> Any:
    """The class or function `name` names; ConfigError (at `path`) when it does not import."""
    from hydra.utils import get_object

    try:
        return get_object(name)
    except Exception as err:
        raise ConfigError(path, name, f"an importable class or function ({first_line(err)})") from None


def qualname(target: Any) -> str:
    return f"{target.__module__}.{target.__qualname__}"
