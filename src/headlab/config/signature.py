"""Every `_target_` node of a composed config checked against its target's signature: every key a
parameter, every value of the declared type. The signature is the schema (no copy of it is kept), so a
config cannot drift from the code it configures; a flat knob (`optim.lr`) is checked through the
parameter it is interpolated into (`optim.optimizer.lr`) and named as itself (headlab.tasks.train_config).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import os
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Union

from headlab.config.messages import describe, first_line, is_abstract, unknown_key, yaml_text
from headlab.errors import ConfigError

# Parameters the code passes itself (train() the data's sizes, the run its id): never a config key.
SUPPLIED = {"headlab.model.ModelConfig": ("vocab_size", "n_classes", "pad_id", "n_domains"),
            "headlab.model.lm.LMConfig": ("vocab_size", "n_classes", "pad_id", "n_domains"),
            "headlab.lit.callbacks.HeadMetricsCallback": ("run_id",)}
# The functions a classifier source's mapping (`data.synthetic: {n: 6000}`) is passed to.
READERS = {"synthetic": "headlab.data.synthetic.generate_synthetic",
           "multidomain": "headlab.data.multidomain.generate_multidomain", "files": "headlab.data.files.load_file_splits"}

# Targets whose **kwargs go to another function, which then types the extra keys.
_KWARGS_GO_TO = {"lightning.pytorch.loggers.wandb.WandbLogger": "wandb.init"}
# Stands for a value that only resolves inside a Hydra run (`${hydra:runtime.output_dir}`).
UNRESOLVED = type("_Unresolved", (), {"__repr__": lambda self: "<resolved by Hydra>"})()


def check_target(path: str, node: Mapping[str, Any]) -> None:
    """Every key of `node` must be a parameter of its `_target_` (less those the code passes itself), with a
    value of its declared type; a mapping that goes to a reader (`data.synthetic`) is checked against it."""
    name = str(node["_target_"])
    params, var_kwargs, owner = parameters(path, name)
    forwarded = _KWARGS_GO_TO.get(owner or "")
    if forwarded and var_kwargs:
        extra, var_kwargs, _ = parameters(path, forwarded)
        params = {**extra, **params}
    for key in SUPPLIED.get(name, ()):
        params.pop(key, None)
    _check_keys(path, node, params, var_kwargs, owner)
    for key, reader in READERS.items():
        if isinstance(node.get(key), Mapping) and key in params:
            inner = parameters(f"{path}.{key}", reader)[0]
            inner.pop("seed", None)  # the source's own seed
            _check_keys(f"{path}.{key}", node[key], inner, False, None)


def _check_keys(path: str, node: Mapping[str, Any], params: dict[str, Param], var_kwargs: bool, owner: str | None) -> None:
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
        allowed = describe(hint)
        plain = isinstance(default, (bool, int, float, str)) or (isinstance(default, (list, tuple)) and default)
        example = f", e.g. {yaml_text(default)}" if plain and not allowed.startswith("one of") else ""
        raise ConfigError(path, value, f"{allowed}{example}")


@dataclasses.dataclass(frozen=True)
class Param:
    hint: Any
    default: Any


def parameters(path: str, name: str) -> tuple[dict[str, Param], bool, str | None]:
    """The keyword parameters of the class or function `name` with their type hints, whether it takes
    **kwargs, and its full name (None for headlab's own, whose keys are named by their node)."""
    params, var_kwargs, owner = _imported_parameters(locate(f"{path}._target_", name))
    return dict(params), var_kwargs, None if name.startswith("headlab.") else owner


@functools.lru_cache(maxsize=None)  # inspected once per process: the Trainer's hints take milliseconds each time
def _imported_parameters(target: Any) -> tuple[dict[str, Param], bool, str]:
    """A headlab class whose `__init__` passes `**kwargs` on (`SyntheticDataModule`) takes its bases' too."""
    chain = [c for c in target.__mro__ if "__init__" in vars(c)] if inspect.isclass(target) else [target]
    params: dict[str, Param] = {}
    for owner in chain:
        signature = inspect.signature(owner.__init__ if inspect.isclass(owner) else owner)
        hints = _type_hints(owner)
        for key, p in signature.parameters.items():
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and key != "self":
                params.setdefault(key, Param(hints.get(key, Any), p.default))
        var_kwargs = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
        if not (var_kwargs and owner.__module__.startswith("headlab.")):
            break
    return params, var_kwargs, f"{target.__module__}.{target.__qualname__}"


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
        _check_keys(path, value, fields, False, f"{hint.__module__}.{hint.__qualname__}")  # a dataclass given as a mapping: its fields
        return True
    return False


def locate(path: str, name: str) -> Any:
    """The class or function `name` names; ConfigError (at `path`) when it does not import."""
    from hydra.utils import get_object

    try:
        return get_object(name)
    except Exception as err:
        raise ConfigError(path, name, f"an importable class or function ({first_line(err)})") from None

