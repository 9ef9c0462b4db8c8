"""`check_overrides`: the command line checked before Hydra runs, so a typo costs one line.

Unknown group options, values Hydra's override grammar cannot read, sweeps without -m, and, by
composing the config (no files written), unknown keys and values a schema rejects. With -m each
job of a sweep is composed and validated, so one bad value cannot stop a sweep half-way.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from headlab.config import register_configs
from headlab.config.messages import first_line, schema_error
from headlab.config.train_schema import TrainKeys
from headlab.config.validate import validate_config
from headlab.errors import ConfigError

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
    overrides = override_args(args)
    parsed = [parse_override(o) for o in overrides]
    if flags & _OTHER_CONFIG_FLAGS:
        return
    multirun = bool(flags & {"-m", "--multirun"})
    refuse_sweeps_without_multirun(parsed, multirun)
    _check_composed(overrides, parsed, multirun)


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


def _check_composed(overrides: list[str], parsed: list[Any], multirun: bool) -> None:
    from hydra import compose, initialize_config_module
    from hydra.core.override_parser.types import ValueType

    if any(p.value_type in (ValueType.GLOB_CHOICE_SWEEP, ValueType.INTERVAL_SWEEP) for p in parsed):
        return  # not enumerable here: Hydra expands (and reports) them
    register_configs()
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
            parsed_param = parse_override(f"{key}={values}")
            sweeps[key] = (list(parsed_param.sweep_string_iterator()) if parsed_param.is_sweep_override()
                           else [parsed_param.get_value_element_as_str()])
    return sweeps


def _replace(base: list[str], key: str, value: str) -> list[str]:
    kept = [o for o in base if o.split("=", 1)[0].lstrip("+~") != key.lstrip("+~")]
    prefix = next((o.split("=", 1)[0] for o in base if o.split("=", 1)[0].lstrip("+~") == key.lstrip("+~")), key)
    return [*kept, f"{prefix}={value}"]


def compose_train(overrides: list[str], *, return_hydra_config: bool = False) -> DictConfig:
    """headlab-train's config for `overrides` (as `headlab-train overrides...` composes it), a
    composition error as one ConfigError; no files written."""
    from hydra import compose, initialize_config_module

    register_configs()
    with initialize_config_module("headlab.conf", version_base="1.3"):
        return _compose(compose, overrides, overrides, return_hydra_config)


def _compose(compose: Any, overrides: list[str], original: list[str], return_hydra_config: bool = True) -> DictConfig:
    """`compose`, with Hydra's multi-line composition errors condensed to one ConfigError: a
    schema's (wrong type, unknown key) naming what it allows, any other with Hydra's own words."""
    try:
        return compose("train", overrides=overrides, return_hydra_config=return_hydra_config)
    except ConfigError:
        raise
    except Exception as err:
        cause: BaseException | None = err
        while cause is not None:
            mistake = schema_error(cause, _values(overrides), lambda path: _schema_at(compose, overrides, path))
            if mistake is not None:
                raise mistake from None
            cause = cause.__cause__ or cause.__context__
        message = " ".join(line.strip() for line in str(err).strip().splitlines() if line.strip())
        key, value = _culprit(message, overrides or original)
        close = _close_root_key(compose, key, message)
        if close:
            raise ConfigError(key, value, f"a key of the config (did you mean {close}? +{key}=... adds a new key)") from None
        raise ConfigError(key, value, f"an override Hydra accepts ({message})") from None


def _close_root_key(compose: Any, key: str, message: str) -> str | None:
    """For a top-level key Hydra cannot override (a typo of `seed`, `threads`, a group name...), the
    closest key or group of train.yaml: more use than Hydra's advice to add it with `+`."""
    import difflib

    if "." in key or "Could not override" not in message:
        return None
    try:
        known = [str(k) for k in compose("train", overrides=[]).keys()]
    except Exception:  # noqa: BLE001 - the base config itself fails: Hydra's words are all we have
        return None
    close = difflib.get_close_matches(key, known, n=1)
    return close[0] if close else None


def _schema_at(compose: Any, overrides: list[str], path: str) -> Any:
    """The schema of the node at `path` in the config the overrides that do not set it compose
    (the top level, open to headlab-distill's keys, has its own: TrainKeys)."""
    if not path:
        return TrainKeys
    others = [o for o in overrides if not o.split("=", 1)[0].lstrip("+~").startswith(path + ".")]
    try:
        node = OmegaConf.select(compose("train", overrides=others), path)
    except Exception:  # noqa: BLE001 - another override fails too: the caller reports Hydra's words
        return None
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
