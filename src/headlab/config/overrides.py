"""Why a command line does not compose, in one line naming the key to fix.

Hydra composes a command's config once, when it runs (`headlab.config.app.run_hydra`); when Hydra
refuses the command line, `check_overrides` says why: unknown group options (naming the options),
values Hydra's override grammar cannot read, sweeps without -m, unknown keys (naming the close key,
never Hydra's advice to add it with `+`) and values a schema rejects. `compose_checked` is the ONE
translator of composition errors; the CheckedSweeper composes each job of a -m sweep through it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from omegaconf import DictConfig, OmegaConf

from headlab.config import register_configs
from headlab.config.messages import first_line, schema_error, schema_fields, unknown_key
from headlab.config.train_schema import ADDED_KEYS, TrainKeys
from headlab.errors import ConfigError

_NO_CHECK_FLAGS = {"-h", "--help", "--hydra-help", "--version", "-sc", "--shell-completion", "--experimental-rerun"}
_OTHER_CONFIG_FLAGS = {"-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir"}
_FLAGS_WITH_VALUE = {"-c", "--cfg", "-p", "--package", *_OTHER_CONFIG_FLAGS}
_INFO_VALUES = {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"}
_GRAMMAR_DOC = "https://hydra.cc/docs/advanced/override_grammar/basic/"
CONFIG_MODULE = "headlab.conf"


def check_overrides(args: list[str], config_name: str = "train", config_module: str = CONFIG_MODULE) -> None:
    """ConfigError for the first mistake on the command line `args` of the command `config_name`
    (composed here, no files written); nothing when it composes. Each value of a -m sweep is the
    CheckedSweeper's to check; `--help`-like flags and another primary config are left to Hydra."""
    flags = {a.split("=", 1)[0] for a in args if a.startswith("-")}
    if flags & (_NO_CHECK_FLAGS | _OTHER_CONFIG_FLAGS):
        return
    overrides = override_args(args)
    parsed = [parse_override(o) for o in overrides]
    refuse_sweeps_without_multirun(parsed, bool(flags & {"-m", "--multirun"}))
    from hydra import compose

    with composing(config_module):
        compose_checked(compose, config_name, [o for o, p in zip(overrides, parsed) if not p.is_sweep_override()],
                        return_hydra_config=True)


@contextmanager
def composing(config_module: str = CONFIG_MODULE) -> Iterator[None]:
    """Hydra's compose API on `config_module`, also from inside a running Hydra app (whose global
    state is put back afterwards)."""
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    held = GlobalHydra.instance().hydra if GlobalHydra.instance().is_initialized() else None
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module, version_base="1.3"):
            yield
    finally:
        if held is not None:
            GlobalHydra.instance().clear()
            GlobalHydra.instance().initialize(held)


def refuse_sweeps_without_multirun(parsed: list[Any], multirun: bool) -> None:
    """`key=a,b` without -m would be one job with the text "a,b": say so instead."""
    sweeps = [p for p in parsed if p.is_sweep_override()]
    if sweeps and not multirun:
        key, value = sweeps[0].get_key_element(), sweeps[0].input_line.partition("=")[2]
        raise ConfigError(key, value, "one value (a list: key=[a,b]; text with commas: key='a,b'; "
                          "one job per value: add -m)")


def override_args(args: list[str]) -> list[str]:
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


def parse_override(override: str) -> Any:
    """One override parsed by Hydra's grammar; a value it cannot read is one ConfigError with the fix."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        return OverridesParser.create().parse_override(override)
    except HydraException as err:
        key, _, value = override.partition("=")
        allowed = f"a value Hydra's override grammar reads ({first_line(err)})"
        if any(not ch.isascii() for ch in value) or not value.strip("[]"):
            allowed += f"; quote non-ASCII text, e.g. '{key}={_quoted(value)}'"
        raise ConfigError(key.lstrip("+~"), value, f"{allowed}; see {_GRAMMAR_DOC}") from None


def _quoted(value: str) -> str:
    """`[的,！]` -> `["的","！"]`: each item in double quotes, which Hydra's lexer reads as text."""
    if value.startswith("[") and value.endswith("]"):
        items = [item.strip().strip("'\"") for item in value[1:-1].split(",") if item.strip()]
        return "[" + ",".join(f'"{item}"' for item in items) + "]"
    return f'"{value.strip(chr(39) + chr(34))}"'


def compose_train(overrides: list[str], *, return_hydra_config: bool = False) -> DictConfig:
    """headlab-train's config for `overrides` (as `headlab-train overrides...` composes it), a
    composition error as one ConfigError; no files written."""
    from hydra import compose

    with composing():
        return compose_checked(compose, "train", overrides, return_hydra_config=return_hydra_config)


def compose_checked(compose: Any, config_name: str, overrides: list[str], *,
                    return_hydra_config: bool = False) -> DictConfig:
    """`compose`, with Hydra's multi-line composition errors condensed to one ConfigError naming the
    override: a group option it lacks (naming the options), a key no node has (naming the close key,
    never Hydra's advice to add it with `+`), a value of the wrong type (what the schema allows), any
    other with Hydra's own words. Keys added with `+` must be keys the config knows. The ONE
    translator of composition errors: headlab-train and every `run_app` command use it."""
    from hydra.errors import MissingConfigException

    try:
        cfg = compose(config_name, overrides=overrides, return_hydra_config=return_hydra_config)
    except ConfigError:
        raise
    except MissingConfigException as err:
        group = next((o.partition("=") for o in overrides if f"'{o.partition('=')[0].lstrip('+~')}/" in str(err)), None)
        if group is not None and err.options:
            key = group[0].lstrip("+~")
            raise ConfigError(key, group[2], f"one of {', '.join(sorted(err.options))} (the config group {key}/)") from None
        raise ConfigError("config", " ".join(overrides), flatten(err)) from None
    except Exception as err:
        raise _composition_error(compose, config_name, overrides, err) from None
    refuse_unknown_added_keys(compose, config_name, overrides)
    return cfg


def _composition_error(compose: Any, config_name: str, overrides: list[str], err: Exception) -> ConfigError:
    cause: BaseException | None = err
    while cause is not None:
        mistake = schema_error(cause, _values(overrides), lambda path: _schema_at(compose, config_name, overrides, path))
        if mistake is not None:
            return mistake
        cause = cause.__cause__ or cause.__context__
    message = flatten(err)
    key, value = _culprit(message, overrides)
    if key != "overrides":
        base = _base(compose, config_name, [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != key])
        unknown = unknown_key_at(base, key, _values(overrides).get(key, value)) if base is not None else None
        if unknown is not None:
            return unknown
        typed = expected_type(err.__cause__ or err)
        if typed != first_line(err.__cause__ or err):
            return ConfigError(key, value, typed)
    return ConfigError(key, value, f"an override Hydra accepts ({message})")


def refuse_unknown_added_keys(compose: Any, config_name: str, overrides: list[str]) -> None:
    """`+foo=1` (`++foo=1`) adds a key Hydra accepts silently and no code reads: refused, naming the
    close key, at the top level and in every node a schema types (the keys a schema declares, and
    the options ADDED_KEYS lets it take). Group selections (`+distill=default`), `hydra.*` and the
    nodes of a `_target_` without a schema (validate_config checks their signature) are left alone."""
    added = {o.split("=", 1)[0].lstrip("+"): o.partition("=")[2] for o in overrides if o.startswith("+") and "=" in o}
    keys = [k for k in added if not k.startswith("hydra") and "/" not in k and "@" not in k]
    if not keys:
        return
    from hydra.core.global_hydra import GlobalHydra

    loader = GlobalHydra.instance().config_loader()
    keys = [k for k in keys if "." in k or not loader.get_group_options(k, config_name=config_name)]
    if not keys:
        return  # group selections (+distill=default)
    others = [o for o in overrides if o.split("=", 1)[0].lstrip("+") not in keys]
    base = _base(compose, config_name, others, return_hydra_config=True)
    if base is None:
        return  # the other overrides fail to compose: each reports itself
    from omegaconf import OmegaConf

    groups = [str(g) for g in OmegaConf.select(base, "hydra.runtime.choices", default={}) if "/" not in str(g)
              and not str(g).startswith("hydra")]  # the config's own groups: +distill=default selects one
    values = _values(overrides)
    for key in keys:
        parent, _, leaf = key.rpartition(".")
        if not parent:
            unknown = unknown_key_at(base, key, values.get(key, added[key]), extra=groups)
            if unknown is not None:
                raise unknown
            continue
        node = OmegaConf.select(base, parent)
        schema = OmegaConf.get_type(node) if OmegaConf.is_dict(node) else None
        if not dataclasses.is_dataclass(schema) or leaf in node.keys():
            continue  # no schema (a `_target_`'s node: validate_config checks its signature), or a known key
        options = next((extra for kind, extra in ADDED_KEYS if issubclass(schema, kind)), None)
        allowed = [*schema_fields(schema), *(schema_fields(options) if options else {})]
        if leaf not in allowed:
            raise unknown_key(key, values.get(key, added[key]), allowed)


def unknown_key_at(base: DictConfig, key: str, value: Any, extra: Any = ()) -> ConfigError | None:
    """`key` absent from the composed `base`: a ConfigError naming its parent's close key; None when present."""
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(base, parent) if parent else base
    if not isinstance(node, DictConfig) or leaf in node.keys():  # `in node` is False for a ??? value
        return None
    known = list(dict.fromkeys([str(k) for k in node.keys() if str(k) != "hydra"] + list(extra)))
    return unknown_key(key, value, known)


def _base(compose: Any, config_name: str, overrides: list[str], return_hydra_config: bool = False) -> DictConfig | None:
    try:
        return compose(config_name, overrides=overrides, return_hydra_config=return_hydra_config)
    except Exception:  # noqa: BLE001 - another override fails too: the caller reports Hydra's words
        return None


def _schema_at(compose: Any, config_name: str, overrides: list[str], path: str) -> Any:
    """The schema of the node at `path` in the config the overrides that do not set it compose
    (headlab-train's top level, open to headlab-distill's keys, has its own: TrainKeys)."""
    others = [o for o in overrides if not o.split("=", 1)[0].lstrip("+~").startswith(path + ".")] if path else overrides
    if not path and config_name == "train":
        return TrainKeys
    base = _base(compose, config_name, others)
    if base is None:
        return None
    node = OmegaConf.select(base, path) if path else base
    return OmegaConf.get_type(node) if OmegaConf.is_dict(node) else None


def _values(overrides: list[str]) -> dict[str, Any]:
    """key -> the value each override sets, as Hydra reads it (`{a:1}` -> {'a': 1})."""
    values = {}
    for override in overrides:
        parsed = parse_override(override)
        if not parsed.is_sweep_override() and parsed.value_type is not None:
            values[parsed.get_key_element().lstrip("+~")] = parsed.value()
    return values


def _culprit(message: str, overrides: list[str]) -> tuple[str, str]:
    """The override a Hydra message is about (the one whose key it quotes), as (key, value)."""
    pairs = [(o.split("=", 1)[0].lstrip("+~"), o.partition("=")[2]) for o in overrides]
    for key, value in sorted(pairs, key=lambda kv: -len(kv[0])):
        if f"'{key}'" in message or f"full_key: {key}" in message or f"'{key}=" in message:
            return key, value
    return "overrides", " ".join(overrides)


_TYPE_WORDS = {"Integer": "an integer", "Float": "a number", "Boolean": "true or false", "String": "text"}


def expected_type(err: BaseException) -> str:
    """OmegaConf's "Value 'x' of type 'str' could not be converted to Integer" as "an integer"."""
    text = first_line(err)
    if "is not a valid bool" in text:
        return "true or false"
    for word, phrase in _TYPE_WORDS.items():
        if text.endswith(f"converted to {word}"):
            return phrase
    return text


def flatten(err: BaseException) -> str:
    return " ".join(line.strip() for line in str(err).strip().splitlines() if line.strip())
