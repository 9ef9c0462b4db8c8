"""Config mistakes become one line (`headlab.errors.ConfigError`, exit 2) before anything runs.

`check_overrides` reads the command line before Hydra runs: unknown group options, unknown keys,
values Hydra's override grammar cannot read, sweep values. `validate_config` checks the composed
config before any data is loaded or file written: missing mandatory values, every key against
the type its consumer declares (the signature of the node's `_target_`, so the schema is never a
second copy that drifts), list lengths, and the cheap value ranges (by building the objects whose
constructors check them: ModelConfig, the datamodule, the callbacks).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import inspect
import os
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Union

from omegaconf import DictConfig, ListConfig, OmegaConf

from headlab.errors import ConfigError

# Groups without a `_target_`, and what train() builds from them (first match names the type).
_UNTARGETED = {
    "model": ("headlab.model.ModelConfig", "headlab.lit.HeadClassifierModule"),
    "optim": ("headlab.lit.HeadClassifierModule",),
}
# Mappings a target takes as one argument, and what their keys are passed to.
_NESTED = {
    ("headlab.data.datamodule.TextDataModule", "synthetic"): "headlab.data.synthetic.generate_synthetic",
    ("headlab.data.datamodule.TextDataModule", "multidomain"): "headlab.data.multidomain.generate_multidomain",
    ("headlab.data.datamodule.TextDataModule", "files"): {"train": str, "val": Union[str, None], "test": Union[str, None]},
}
# Targets whose **kwargs go to another function, which then types the extra keys.
_KWARGS_GO_TO = {"lightning.pytorch.loggers.wandb.WandbLogger": "wandb.init"}
# Top-level keys of train.yaml (no target consumes them as a whole).
_TOP_LEVEL = {
    "seed": int, "resume": Union[bool, Literal["auto"]], "test": bool, "sweep_name": Union[str, None],
    "threads": Union[int, Literal["auto"], None], "tags": list[str], "resume_allow": list[str],
}
# Groups whose targets are cheap, pure constructors that check their own values: built here.
_BUILT_TO_CHECK = ("data", "callbacks", "optim")
_MISSING_EXAMPLES = {"data.files.train": "data=files data.files.train=/path/to/train.csv (CSV or JSONL with text, label)"}
# Placeholder for a value that only resolves inside a Hydra run (`${hydra:runtime.output_dir}`).
_UNRESOLVED = type("_Unresolved", (), {"__repr__": lambda self: "<resolved by Hydra>"})()


# ---- the composed config --------------------------------------------------------------------------
def validate_config(cfg: DictConfig) -> None:
    """Raise `ConfigError` for the first mistake in the composed config; return if none."""
    sources: dict[str, str] = {}
    plain = {key: _plain(_leaf(cfg, key, key), key, sources) for key in cfg.keys() if key != "hydra"}
    try:
        for key, hint in _top_level_types().items():
            if key in plain:
                _check_value(key, plain[key], hint)
        for group, node in plain.items():
            if isinstance(node, dict) and group != "paths":
                _check_group(group, node)
        _check_ranges(plain)
    except ConfigError as err:
        source = _source(err.key, sources)
        if source == err.key:
            raise
        raise ConfigError(source, err.value, err.allowed) from None


def _top_level_types() -> dict[str, Any]:
    """`_TOP_LEVEL`, and for a top-level key added to train.yaml since, the type of its default there."""
    from importlib.resources import files

    defaults = OmegaConf.load(str(files("headlab.conf") / "train.yaml"))
    inferred = {key: type(value) for key, value in defaults.items()
                if key != "defaults" and isinstance(value, (bool, int, float, str, list))}
    return {**inferred, **_TOP_LEVEL}


def _source(path: str, sources: dict[str, str]) -> str:
    """`optim.optimizer.lr` (`${optim.lr}`) -> `optim.lr`: the key the user sets."""
    seen = {path}
    while path in sources and sources[path] not in seen:
        path = sources[path]
        seen.add(path)
    return path


def _plain(node: Any, path: str, sources: dict[str, str]) -> Any:
    """The config as plain dicts and lists, each leaf resolved alone, so that a missing value or a
    broken interpolation is reported with its own key (and `${hydra:...}` outside a run is skipped).
    `sources` collects `key -> referenced key` for values that are plain `${key}` references."""
    if isinstance(node, DictConfig):
        plain = {}
        for key in node.keys():
            child = _join(path, key)
            reference = re.fullmatch(r"\$\{([\w.]+)\}", str(_raw(node, key)))
            if reference:
                sources[child] = reference.group(1)
            plain[str(key)] = _plain(_leaf(node, key, child), child, sources)
        return plain
    if isinstance(node, ListConfig):
        return [_plain(_leaf(node, i, f"{path}[{i}]"), f"{path}[{i}]", sources) for i in range(len(node))]
    return node


def _leaf(node: DictConfig | ListConfig, key: Any, path: str) -> Any:
    from omegaconf.errors import InterpolationResolutionError, MissingMandatoryValue

    if OmegaConf.is_missing(node, key):
        example = _MISSING_EXAMPLES.get(path, f"{path}=<value>")
        raise ConfigError(path, "???", f"a value: the key is mandatory (??? marks it unset), e.g. {example}")
    try:
        return node[key]
    except (MissingMandatoryValue, InterpolationResolutionError) as err:
        if _set_by_hydra_run(err):
            return _UNRESOLVED  # Hydra sets these in a run; outside one (a pre-check) they stay unset
        raw = _raw(node, key)
        if isinstance(err, MissingMandatoryValue):
            missing = getattr(err, "full_key", None) or path
            raise ConfigError(path, raw, f"an interpolation to a set value ({missing} is unset)") from None
        raise ConfigError(path, raw, f"an interpolation that resolves ({_first_line(err)})") from None


def _set_by_hydra_run(err: Exception) -> bool:
    text = str(err)
    return "HydraConfig was not set" in text or "Missing mandatory value: hydra." in text


def _raw(node: DictConfig | ListConfig, key: Any) -> Any:
    return node._get_node(key)._value()  # noqa: SLF001 - the unresolved `${...}` text


def _check_group(group: str, node: dict[str, Any]) -> None:
    """A group with a `_target_` is checked against it; one without against what train() builds from
    it (`_UNTARGETED`), and its members that have their own `_target_` (callbacks, loggers) each alone."""
    if "_target_" in node:
        _check_node(group, node, _locate(f"{group}._target_", node["_target_"]))
        return
    targeted = any(isinstance(v, dict) and "_target_" in v for v in node.values())
    # flat knobs beside targeted members (optim.lr -> optim.optimizer.lr) are checked where they are used
    consumers = [] if targeted else [_locate(group, name) for name in _UNTARGETED.get(group, ())]
    for key, value in node.items():
        path = f"{group}.{key}"
        if isinstance(value, dict) and "_target_" in value:
            _check_node(path, value, _locate(f"{path}._target_", value["_target_"]))
        elif consumers:
            _check_key(path, key, value, consumers)


def _check_key(path: str, key: str, value: Any, consumers: list[Any]) -> None:
    for consumer in consumers:
        params, _ = _parameters(consumer)
        if key in params:
            _check_value(path, value, params[key].hint, params[key].default)
            return
    if not any(_parameters(c)[1] for c in consumers):
        _raise_unknown(path, value, key, [p for c in consumers for p in _parameters(c)[0]], consumers[0])


def _check_node(path: str, node: dict[str, Any], target: Any) -> None:
    """Every key of `node` must be a parameter of `target`, with a value of its declared type."""
    if isinstance(target, dict):  # a nested mapping's own schema (_NESTED)
        params, var_kwargs = {k: _Param(h, None) for k, h in target.items()}, False
    else:
        params, var_kwargs = _parameters(target)
        forwarded = _KWARGS_GO_TO.get(_qualname(target))
        if forwarded and var_kwargs:
            extra, var_kwargs = _parameters(_locate(f"{path}._target_", forwarded))
            params = {**extra, **params}
    for key, value in node.items():
        if key.startswith("_") and key.endswith("_"):
            continue  # _target_, _partial_, _recursive_, _convert_, _args_
        full = f"{path}.{key}"
        if key not in params:
            if not var_kwargs:
                _raise_unknown(full, value, key, list(params), target)
            continue
        nested = _NESTED.get((_qualname(target), key))
        if nested is not None and isinstance(value, dict):
            _check_node(full, value, nested if isinstance(nested, dict) else _locate(full, nested))
        else:
            _check_value(full, value, params[key].hint, params[key].default)


def _raise_unknown(path: str, value: Any, key: str, known: list[str], target: Any) -> None:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {close[0]}?" if close else f"one of {', '.join(known)}"
    raise ConfigError(path, value, f"a parameter of {_qualname(target)} ({hint})")


def _check_value(path: str, value: Any, hint: Any, default: Any = None) -> None:
    if value is _UNRESOLVED:
        return
    if isinstance(value, dict) and "_target_" in value:
        _check_node(path, value, _locate(f"{path}._target_", value["_target_"]))
        return
    if _matches(value, hint, path) is False:
        example = f", e.g. {_yaml(default)}" if default not in (None, inspect.Parameter.empty, (), []) else ""
        raise ConfigError(path, value, f"{_describe(hint)}{example}")


# ---- types ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Param:
    hint: Any
    default: Any


def _parameters(target: Any) -> tuple[dict[str, _Param], bool]:
    """`target`'s keyword parameters with resolved type hints, and whether it takes **kwargs."""
    signature = inspect.signature(target)
    hints = _type_hints(target)
    params = {name: _Param(hints.get(name, Any), p.default) for name, p in signature.parameters.items()
              if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    var_kwargs = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    return params, var_kwargs


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
    """Does `value` (plain YAML data) fit `hint`? None: the hint cannot be judged, so accept."""
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
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    container = origin or hint
    if container is tuple and args and args[-1] is not Ellipsis:
        return isinstance(value, list) and len(value) == len(args) and all(
            _matches(v, a, path) is not False for v, a in zip(value, args))
    if _is_abstract(container, Mapping):
        return isinstance(value, dict) and (len(args) < 2 or all(_matches(v, args[1], path) is not False
                                                                  for v in value.values()))
    if _is_abstract(container, Iterable) and container is not str:
        if isinstance(value, str) and issubclass(container, str | Sequence):
            return None if not args else args[0] is str  # a string is a sequence of strings
        return isinstance(value, list) and (not args or all(_matches(v, args[0], path) is not False for v in value))
    return _matches_class(value, hint, path)


def _is_abstract(container: Any, kind: type) -> bool:
    """A builtin or `collections.abc` container of `kind` (a torch Tensor is iterable, but no list)."""
    return (inspect.isclass(container) and issubclass(container, kind)
            and container.__module__ in ("builtins", "collections.abc", "typing"))


def _matches_class(value: Any, hint: Any, path: str) -> bool | None:
    if not inspect.isclass(hint):
        return None  # Callable, Protocol, NewType, ...: not judged
    if isinstance(value, hint):
        return True
    if issubclass(hint, os.PathLike):
        return isinstance(value, str)
    if issubclass(hint, enum.Enum):
        return isinstance(value, str) or value in [m.value for m in hint]
    if isinstance(value, dict) and (dataclasses.is_dataclass(hint) or hint.__module__.startswith("headlab")):
        _check_node(path, value, hint)  # a dataclass given as a mapping: its fields
        return True
    return False


def _describe(hint: Any) -> str:
    """`Optional[int]` -> 'an integer or null': what the user should type."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        choices = [_yaml(c) for a in args for c in _choices(a)]
        plain = [a for a in args if not _choices(a)]
        typed = [a for a in plain if not _describable(a)]
        words = [_describe(a) for a in plain if _describable(a)] or [_describe(a) for a in typed]
        words = list(dict.fromkeys(words + choices))
        text = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
        return f"one of {text}" if len(choices) > 2 and len(words) == len(set(choices)) else text
    if origin is Literal:
        return "one of " + ", ".join(dict.fromkeys(_yaml(a) for a in args))
    simple = {bool: "true or false", int: "an integer", float: "a number", str: "a string", type(None): "null"}
    if hint in simple:
        return simple[hint]
    container = origin or hint
    if container is tuple and args and args[-1] is not Ellipsis:
        kinds = set(args)
        return (f"a list of {len(args)} {_plural(args[0])}" if len(kinds) == 1
                else "a list [" + ", ".join(_describe(a) for a in args) + "]")
    if _is_abstract(container, Mapping):
        return "a mapping"
    if _is_abstract(container, Iterable) and container is not str:
        return f"a list of {_plural(args[0])}" if args else "a list"
    if inspect.isclass(hint) and issubclass(hint, os.PathLike):
        return "a path"
    return f"a {getattr(hint, '__name__', hint)}"


def _choices(hint: Any) -> tuple[Any, ...]:
    """The values a Literal, bool or None allows (empty for any other type)."""
    if typing.get_origin(hint) is Literal:
        return typing.get_args(hint)
    return {bool: (True, False), type(None): (None,)}.get(hint, ())


def _describable(hint: Any) -> bool:
    """Can the user type it (a number, text, a list, a path), rather than an object built in code?"""
    container = typing.get_origin(hint) or hint
    return hint in (bool, int, float, str) or typing.get_origin(hint) is Literal or (
        inspect.isclass(container) and (_is_abstract(container, Iterable) or issubclass(container, os.PathLike)))


def _plural(hint: Any) -> str:
    words = {int: "integers", float: "numbers", str: "strings", bool: "booleans"}
    if typing.get_origin(hint) in (Union, types.UnionType):  # float | Tensor -> numbers
        kinds = {words[a] for a in typing.get_args(hint) if a in words}
        return kinds.pop() if len(kinds) == 1 else "values"
    return words.get(hint, "values")


def _yaml(value: Any) -> str:
    """A value as the user types it on the command line: true, null, [0.9, 0.98]."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml(v) for v in value) + "]"
    return str(value)


# ---- ranges and cross-key rules (each checked once, by the code that owns it) -------------------------
def _check_ranges(plain: dict[str, Any]) -> None:
    seed = plain.get("seed")
    if isinstance(seed, int) and seed < 0:
        raise ConfigError("seed", seed, "an integer >= 0")
    from headlab.run.threads import resolve_threads

    resolve_threads(plain.get("threads"), None, 1)
    _check_model(plain)
    lr = _find(plain.get("optim"), "lr")
    if isinstance(lr, (int, float)) and not lr > 0:
        raise ConfigError("optim.lr", lr, "a learning rate > 0")
    _check_trainer(plain.get("trainer") or {}, plain.get("callbacks") or {})
    if (plain.get("data") or {}).get("train_unlabelled") is True:  # rows labelled -1: only a module that says it takes them
        module = _locate("module._target_", str((plain.get("module") or {}).get("_target_")))
        if not getattr(module, "trains_on_unlabelled", False):
            raise ConfigError("data.train_unlabelled", True, "false: only headlab-distill trains on unlabelled rows")
    for group in _BUILT_TO_CHECK:
        _build_to_check(group, plain.get(group))


def _check_model(plain: dict[str, Any]) -> None:
    """ModelConfig checks the model's values; the data supplies vocab, classes and max_len."""
    from headlab.model import ModelConfig

    max_len = (plain.get("data") or {}).get("max_len")
    if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 2:
        raise ConfigError("data.max_len", max_len, "an integer >= 2")
    fields = {f.name for f in dataclasses.fields(ModelConfig)}
    model = plain.get("model") or {}
    ModelConfig(vocab_size=4, n_classes=2, max_len=max_len, **{k: v for k, v in model.items() if k in fields
                                                                 and k not in ("vocab_size", "n_classes", "max_len")})


def _check_trainer(trainer: dict[str, Any], callbacks: dict[str, Any]) -> None:
    max_epochs, max_steps = trainer.get("max_epochs"), trainer.get("max_steps", -1)
    if max_steps in (-1, None) and isinstance(max_epochs, int) and max_epochs < 1:
        raise ConfigError("trainer.max_epochs", max_epochs, "an integer >= 1 (or set trainer.max_steps)")
    if trainer.get("enable_progress_bar") is False:
        from lightning.pytorch.callbacks import ProgressBar

        for name, node in callbacks.items():
            if isinstance(node, dict) and "_target_" in node and _is_subclass(_locate(name, node["_target_"]), ProgressBar):
                raise ConfigError("trainer.enable_progress_bar", False,
                                  f"true while callbacks.{name} is set: for no progress bar, also pass callbacks.{name}=null")


def _build_to_check(group: str, node: Any) -> None:
    """Build the group's objects once and drop them: their constructors check the value ranges."""
    if not isinstance(node, dict):
        return
    members = {group: node} if "_target_" in node else {f"{group}.{k}": v for k, v in node.items()}
    for path, member in members.items():
        if not isinstance(member, dict) or "_target_" not in member or member.get("_partial_"):
            continue
        kwargs = {k: (None if v is _UNRESOLVED else v) for k, v in member.items() if not k.startswith("_")}
        target = _locate(f"{path}._target_", member["_target_"])
        if not _all_required_given(target, kwargs):
            continue  # completed by train() (an optimiser's params, the data's vocab_size): not built here
        try:
            target(**kwargs)
        except ConfigError:
            raise
        except Exception as err:  # noqa: BLE001 - e.g. Lightning's MisconfigurationException: a bad value
            key = next((k for k in kwargs if k in str(err)), None)
            raise ConfigError(f"{path}.{key}" if key else path, kwargs.get(key, member["_target_"]),
                              f"a value {_qualname(target)} accepts ({_first_line(err)})") from None


def _all_required_given(target: Any, kwargs: dict[str, Any]) -> bool:
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(p.name in kwargs for p in parameters
               if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


# ---- helpers -------------------------------------------------------------------------------------
def _locate(path: str, name: str) -> Any:
    from hydra.utils import get_object

    try:
        return get_object(name)
    except Exception as err:
        raise ConfigError(path, name, f"an importable class or function ({_first_line(err)})") from None


def _qualname(target: Any) -> str:
    if isinstance(target, dict):
        return "this mapping"
    return f"{target.__module__}.{target.__qualname__}"


def _is_subclass(target: Any, base: type) -> bool:
    return inspect.isclass(target) and issubclass(target, base)


def _find(node: Any, key: str) -> Any:
    """The first `key` anywhere under `node` (optim.lr today, optim.optimizer.lr after a regroup)."""
    if not isinstance(node, dict):
        return None
    if key in node:
        return node[key]
    return next((found for v in node.values() if (found := _find(v, key)) is not None), None)


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0].strip() if text else type(err).__name__


# ---- the command line ------------------------------------------------------------------------------
_NO_CHECK_FLAGS = {"-h", "--help", "--hydra-help", "--version", "-sc", "--shell-completion", "--experimental-rerun"}
_OTHER_CONFIG_FLAGS = {"-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir"}
_FLAGS_WITH_VALUE = {"-c", "--cfg", "-p", "--package", *_OTHER_CONFIG_FLAGS}
_INFO_VALUES = {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"}
_GRAMMAR_DOC = "https://hydra.cc/docs/advanced/override_grammar/basic/"


def check_overrides(args: list[str]) -> None:
    """The command line's overrides, checked before Hydra runs, so a typo costs one line.

    Group options, the override grammar, and (by composing the config, ~0.3 s, no files written)
    unknown keys and values OmegaConf rejects. Sweeps (`a=1,2`, `range()`, `choice()`, and the
    `hydra.sweeper.params` of a `sweep=` config) with -m: every value is composed, and each job's
    config is validated as `validate_config` would, so one bad value cannot stop a sweep half-way.
    `glob()` and `interval()` sweeps, and another primary config (-cp/-cn/-cd), are left to Hydra.
    """
    flags = {a.split("=", 1)[0] for a in args if a.startswith("-")}
    if flags & _NO_CHECK_FLAGS:
        return
    _check_group_choices(args)
    overrides = _override_args(args)
    parsed = [_parse(o) for o in overrides]
    if flags & _OTHER_CONFIG_FLAGS:
        return
    multirun = bool(flags & {"-m", "--multirun"})
    sweeps = [p for p in parsed if p.is_sweep_override()]
    if sweeps and not multirun:
        key, value = sweeps[0].get_key_element(), sweeps[0].input_line.partition("=")[2]
        raise ConfigError(key, value, "one value (a list: key=[a,b]; text with commas: key='a,b'; "
                          "one job per value: add -m)")
    _check_composed(overrides, parsed, multirun)


def _override_args(args: list[str]) -> list[str]:
    """The positional arguments Hydra reads as overrides (not flags, not a flag's value)."""
    overrides, skip = [], False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg.startswith("-"):
            skip = ("=" not in arg and arg in _FLAGS_WITH_VALUE) or (
                arg in ("-i", "--info") and i + 1 < len(args) and args[i + 1] in _INFO_VALUES)
            continue
        overrides.append(arg)
    return overrides


def _parse(override: str) -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        return OverridesParser.create().parse_override(override)
    except HydraException as err:
        key, _, value = override.partition("=")
        allowed = f"a value Hydra's override grammar reads ({_first_line(err)})"
        if any(not ch.isascii() for ch in value) or not value.strip("[]"):
            allowed += f"; quote non-ASCII text, e.g. '{key}={_quoted(value)}'"
        raise ConfigError(key.lstrip("+~"), value, f"{allowed}; see {_GRAMMAR_DOC}") from None


def _quoted(value: str) -> str:
    """`[的,！]` -> `["的","！"]`: each item in double quotes, which Hydra's lexer reads as text."""
    if value.startswith("[") and value.endswith("]"):
        items = [item.strip().strip("'\"") for item in value[1:-1].split(",") if item.strip()]
        return "[" + ",".join(f'"{item}"' for item in items) + "]"
    return f'"{value.strip(chr(39) + chr(34))}"'


def _check_composed(overrides: list[str], parsed: list[Any], multirun: bool) -> None:
    from hydra import compose, initialize_config_module
    from hydra.core.override_parser.types import ValueType

    if any(p.value_type in (ValueType.GLOB_CHOICE_SWEEP, ValueType.INTERVAL_SWEEP) for p in parsed):
        return  # not enumerable here: Hydra expands (and reports) them
    with initialize_config_module("headlab.conf", version_base="1.3"):
        base = [_single(o, p) for o, p in zip(overrides, parsed)]
        cfg = _compose(compose, base, overrides)
        if not multirun:
            return
        sweeps = _sweeps(parsed, cfg)
        jobs = [base] + [_replace(base, key, value) for key, values in sweeps.items() for value in values[1:]]
        for job in jobs:
            job_cfg = cfg if job is base else _compose(compose, job, overrides)
            if sweeps:
                validate_config(job_cfg)


def _single(override: str, parsed: Any) -> str:
    """A sweep override reduced to its first value, so one config composes."""
    if not parsed.is_sweep_override():
        return override
    return f"{override.split('=', 1)[0]}={next(iter(parsed.sweep_string_iterator()))}"


def _sweeps(parsed: list[Any], cfg: DictConfig) -> dict[str, list[str]]:
    """Each swept key -> its values: the command line's, then a `sweep=` config's sweeper params."""
    sweeps = {p.get_key_element(): list(p.sweep_string_iterator()) for p in parsed if p.is_sweep_override()}
    params = OmegaConf.select(cfg, "hydra.sweeper.params") or {}
    for key, values in params.items():
        if key not in sweeps and not any(p.get_key_element() == key for p in parsed):
            parsed_param = _parse(f"{key}={values}")
            sweeps[key] = (list(parsed_param.sweep_string_iterator()) if parsed_param.is_sweep_override()
                           else [parsed_param.get_value_element_as_str()])
    return sweeps


def _replace(base: list[str], key: str, value: str) -> list[str]:
    kept = [o for o in base if o.split("=", 1)[0].lstrip("+~") != key.lstrip("+~")]
    prefix = next((o.split("=", 1)[0] for o in base if o.split("=", 1)[0].lstrip("+~") == key.lstrip("+~")), key)
    return [*kept, f"{prefix}={value}"]


def _compose(compose: Any, overrides: list[str], original: list[str]) -> DictConfig:
    """`compose`, with Hydra's multi-line composition errors condensed to one ConfigError."""
    try:
        return compose("train", overrides=overrides, return_hydra_config=True)
    except ConfigError:
        raise
    except Exception as err:
        message = " ".join(line.strip() for line in str(err).strip().splitlines() if line.strip())
        key, value = _culprit(message, overrides or original)
        raise ConfigError(key, value, f"an override Hydra accepts ({message})") from None


def _culprit(message: str, overrides: list[str]) -> tuple[str, str]:
    """The override a Hydra message is about (the one whose key it quotes), as (key, value)."""
    pairs = [(o.split("=", 1)[0].lstrip("+~"), o.partition("=")[2]) for o in overrides]
    for key, value in sorted(pairs, key=lambda kv: -len(kv[0])):
        if f"'{key}'" in message or f"full_key: {key}" in message or f"'{key}=" in message:
            return key, value
    return "overrides", " ".join(overrides)


def _check_group_choices(args: list[str]) -> None:
    """`data=foo`, `logger=foo`, `hydra/launcher=foo`: one line naming the group, the value and the
    options, instead of Hydra's multi-line "Could not find 'data/foo'" report."""
    overrides = [a for a in args if "=" in a and not a.startswith("-")]
    candidates = []
    for override in overrides:
        key, _, value = override.partition("=")
        key = key.lstrip("+~")
        if "." in key or "@" in key or not value or any(ch in value for ch in "([{$"):
            continue  # a value override, a package override, a list or sweep syntax: left to Hydra
        candidates.append((key, value))
    if not candidates or any(a.split("=")[0] in ("--config-dir", "-cd") for a in args):
        return  # a user's --config-dir adds options this check cannot see: Hydra reports those
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    # train.yaml's hydra.searchpath (HEADLAB_CONFIG_DIR) or its override adds the user's groups
    searchpath = [o for o in overrides if o.startswith("hydra.searchpath=")]
    with initialize_config_module("headlab.conf", version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        for key, value in candidates:
            options = loader.get_group_options(key, config_name="train", overrides=searchpath)
            if not options:
                continue  # not a config group
            for choice in value.split(","):
                if choice not in options and choice != "null":
                    raise ConfigError(key, choice, f"one of {', '.join(sorted(options))} (the config group {key}/)")
