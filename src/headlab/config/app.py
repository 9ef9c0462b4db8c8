"""Every console script is a Hydra app over a structured-config schema, run the same way.

`run_app` gives each command what `headlab-train` has: one override grammar (`key=value`, `-m
key=a,b` for one job per value), `--cfg job`, `--help` listing its groups and keys, and a config
checked before anything runs: a wrong key, type or choice is one line naming it and exit 2 (Hydra's
own report is several lines with a hint to set HYDRA_FULL_ERROR). The command's function receives
the typed object (`OmegaConf.to_object`), so the schema's `__post_init__` range checks have run.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from headlab.config.messages import describe, first_line, schema_fields, unknown_key
from headlab.errors import ConfigError, HeadlabError

EXIT_CONFIG = 2
CONFIG_MODULE = "headlab.conf"


def run_app(prog: str, config_name: str, task: Callable[[Any], int | None], argv: Sequence[str] | None = None,
            config_module: str = CONFIG_MODULE, schema: Any = None, header: str | None = None,
            footer: str = "") -> int:
    """Run `task(typed_config)` as a Hydra app over the config `config_name`, whose defaults list names
    `schema` (the command's dataclass, kept beside the work it configures) as `<config_name>_schema`.

    With `header` (a tool command: the `--help` text above its keys, `footer` below them) run_app writes that
    config itself (`store_tool_config`); without, it is `conf/<config_name>.yaml` (headlab-train, -distill,
    -analyze-hf: configs with groups of their own). Returns the exit code: `task`'s (None = 0), 2 for a config
    or input mistake (one line on stderr).
    """
    import hydra

    from headlab.config.run_check import typed

    store_schema(config_name, schema)
    if header is not None:
        store_tool_config(prog, config_name, header, footer)
    outcome: dict[str, Any] = {"code": 0}

    @hydra.main(version_base="1.3", config_path=f"pkg://{config_module}", config_name=config_name)
    def _main(cfg: Any) -> None:
        try:
            outcome["code"] = task(typed(cfg)) or 0
        except HeadlabError as err:
            if _multirun():  # Hydra records the job as failed and goes on with the others
                raise
            print(f"{prog}: error: {err}", file=sys.stderr)
            outcome["code"] = EXIT_CONFIG

    code = run_hydra(prog, config_name, _main, list(sys.argv[1:] if argv is None else argv), config_module)
    return code or int(outcome["code"])


def run_hydra(prog: str, config_name: str, hydra_main: Callable[[], Any], args: Sequence[str],
              config_module: str = CONFIG_MODULE) -> int:
    """Call the `@hydra.main` function `hydra_main` on `args`; 0, or EXIT_CONFIG after one stderr line.

    Hydra composes the command line once. It re-raises here (HYDRA_FULL_ERROR) instead of printing its
    several-line report, and this is the one place that words a mistake: a refusal of the checks that
    run before anything is written (`headlab.config.run_check`, the CheckedSweeper), or an error of
    Hydra's composition, worded by `explain` from what the error itself carries (nothing is composed again).
    """
    from headlab.config import register_configs
    from headlab.config.run_check import ConfigRefused

    register_configs()
    unknown = _read_argv(args)[1]
    if unknown:
        print(f"{prog}: error: unrecognized arguments: {' '.join(unknown)} (settings are key=value "
              f"overrides; `{prog} --help` lists the keys)", file=sys.stderr)
        return EXIT_CONFIG
    saved_env, saved_argv = os.environ.get("HYDRA_FULL_ERROR"), sys.argv
    os.environ["HYDRA_FULL_ERROR"] = "1"
    sys.argv = [prog, *args]
    try:
        hydra_main()
        return 0
    except ConfigRefused as refused:
        mistake: BaseException = refused.error
    except HeadlabError as err:  # the CheckedSweeper refused a job, or a -m job failed so
        mistake = err
    except Exception as err:
        from hydra.errors import HydraException
        from omegaconf.errors import OmegaConfBaseException

        explained = explain(err, override_args(args))
        if explained is None and not isinstance(err, (HydraException, OmegaConfBaseException)):
            raise  # a failure that is no config mistake: the exception as it is
        mistake = explained or ConfigError("command line", " ".join(args), f"what Hydra accepts ({flatten(err)})")
    finally:
        sys.argv = saved_argv
        os.environ.pop("HYDRA_FULL_ERROR", None)
        if saved_env is not None:
            os.environ["HYDRA_FULL_ERROR"] = saved_env
    print(f"{prog}: error: {mistake}", file=sys.stderr)
    return EXIT_CONFIG


def _read_argv(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """Hydra's own parser on `args`: the overrides, and the flags it does not know (`--evidence`: argparse's
    report of them is its usage, 8 lines); nothing of either when a flag's value is bad (Hydra reports that
    as it runs)."""
    import contextlib
    import io

    from hydra._internal.utils import get_args_parser

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            parsed, rest = get_args_parser().parse_known_args(list(args))
    except SystemExit:
        return [], []
    flags = [a for a in rest if a.startswith("-")]
    return [*parsed.overrides, *(a for a in rest if not a.startswith("-"))], flags


# ---- Hydra's and OmegaConf's errors in one line -------------------------------------------------------
_GRAMMAR_DOC = "https://hydra.cc/docs/advanced/override_grammar/basic/"


def explain(err: BaseException, overrides: Sequence[str]) -> ConfigError | None:
    """A composition error as one ConfigError naming the override to fix, read from the error itself: a
    group option Hydra lacks (naming the options), a value its grammar cannot read (with the quoting that
    works), a sweep without -m, a key no node has (naming the close key, never Hydra's advice to add it
    with `+`), a value of the wrong type (what the schema allows); None when the error is none of these."""
    from hydra.errors import MissingConfigException, OverrideParseException

    values = _values(overrides)
    for cause in _chain(err):
        text = flatten(cause)
        if isinstance(cause, ConfigError):
            return cause
        if isinstance(cause, MissingConfigException) and cause.options:
            key, value = next(((k, v) for k, v in _pairs(overrides) if f"'{k}/" in text), ("config", text))
            return ConfigError(key, value, f"one of {', '.join(sorted(cause.options))} (the config group {key}/)")
        if isinstance(cause, OverrideParseException):
            return _grammar_error(first_line(cause).partition(": ")[2] or text, first_line(cause.__cause__ or cause))
        merging = re.match(r"Error merging override (\S+)", text)
        if merging and "Cannot merge" in flatten(cause.__cause__ or cause):  # {a: 1} for a list, [1] for a mapping
            key, _, text = merging.group(1).lstrip("+~").partition("=")
            value = values.get(key, text)
            held, given = ("list", "mapping") if isinstance(value, dict) else ("mapping", "list")
            return ConfigError(key, value, f"a {held} (a {given} cannot replace the {held} the config holds there)")
        if text.startswith("Ambiguous value for argument"):
            key, value = next((k, v) for k, v in _pairs(overrides) if f"'{k}=" in text or f"'+{k}=" in text)
            return ConfigError(key, value, "one value (a list: key=[a,b]; text with commas: key='a,b'; "
                               "one job per value: add -m)")
        mistake = schema_error(cause, values)
        if mistake is not None:
            return mistake
    return None


def schema_error(err: BaseException, values: dict[str, Any]) -> ConfigError | None:
    """OmegaConf's refusal of a key or value, from the node it carries: a key the node lacks (naming its
    close key) or a value its schema types otherwise (naming the type)."""
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ConfigTypeError, ValidationError

    from headlab.config import config_groups

    full_key = str(getattr(err, "full_key", "") or "")
    node = getattr(err, "parent_node", None)
    if not full_key or node is None or not isinstance(err, (ConfigAttributeError, ConfigKeyError, ConfigTypeError, ValidationError)):
        return None
    key = re.sub(r"\[\d+\]$", "", full_key)
    if not isinstance(node, DictConfig):  # a list (or an item of one) is wrong: the field that holds it
        node = node._get_parent()  # noqa: SLF001
    leaf = key.rpartition(".")[2]
    value = _value_at(values, key, getattr(err, "value", None))
    if not isinstance(node, DictConfig):
        return None
    schema = OmegaConf.get_type(node)
    fields = schema_fields(schema) if dataclasses.is_dataclass(schema) else {}
    if leaf in fields and not isinstance(err, (ConfigAttributeError, ConfigKeyError)):
        return ConfigError(key, value, describe(fields[leaf]))
    if leaf not in node.keys():
        known = [str(k) for k in node.keys() if str(k) != "hydra"]
        if node._get_parent() is None and not fields:  # noqa: SLF001 - headlab-train's open top level: also a
            known += [g for g in config_groups() if g not in known]  # group not selected (debugg=fast -> debug)
        return unknown_key(key, value, known)
    return None


def _grammar_error(override: str, reason: str) -> ConfigError:
    key, _, value = override.partition("=")
    allowed = f"a value Hydra's override grammar reads ({reason})"
    if any(not ch.isascii() for ch in value) or not value.strip("[]"):
        allowed += f"; quote non-ASCII text, e.g. '{key}={_quoted(value)}'"
    return ConfigError(key.lstrip("+~"), value, f"{allowed}; see {_GRAMMAR_DOC}")


def _quoted(value: str) -> str:
    """`[的,！]` -> `["的","！"]`: each item in double quotes, which Hydra's lexer reads as text."""
    if value.startswith("[") and value.endswith("]"):
        items = [item.strip().strip("'\"") for item in value[1:-1].split(",") if item.strip()]
        return "[" + ",".join(f'"{item}"' for item in items) + "]"
    return f'"{value.strip(chr(39) + chr(34))}"'


def _chain(err: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def _pairs(overrides: Sequence[str]) -> list[tuple[str, str]]:
    return [(o.split("=", 1)[0].lstrip("+~"), o.partition("=")[2]) for o in overrides]


def _values(overrides: Sequence[str]) -> dict[str, Any]:
    """key -> the value each override sets, as Hydra's grammar reads it (`{a:1}` -> {'a': 1}); the text
    when the grammar cannot read it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser, values = OverridesParser.create(), {}
    for key, text in _pairs(overrides):
        try:
            parsed = parser.parse_override(f"{key}={text}")
            values[key] = text if parsed.is_sweep_override() or parsed.value_type is None else parsed.value()
        except Exception:  # noqa: BLE001 - the grammar's own error is reported from the exception
            values[key] = text
    return values


def _value_at(values: dict[str, Any], key: str, fallback: Any) -> Any:
    """The value set at `key`, also inside a mapping set at a parent (`data.synthetic={a:1}`)."""
    parts = key.split(".")
    for cut in range(len(parts), 0, -1):
        value = values.get(".".join(parts[:cut]), _NOTHING)
        for part in parts[cut:]:
            value = value.get(part, _NOTHING) if isinstance(value, dict) else _NOTHING
        if value is not _NOTHING:
            return value
    return fallback


_NOTHING = object()


def override_args(args: Sequence[str]) -> list[str]:
    """The arguments Hydra reads as overrides (not flags, not a flag's value), as its own parser reads them."""
    return _read_argv(args)[0]


def flatten(err: BaseException) -> str:
    return " ".join(line.strip() for line in str(err).strip().splitlines() if line.strip())


# ---- composing outside a run (tests, the reproduce runner, headlab-doctor plan=) ------------------------
@contextmanager
def composing(config_module: str = CONFIG_MODULE) -> Iterator[None]:
    """Hydra's compose API on `config_module`, also from inside a running Hydra app (whose global
    state is put back afterwards)."""
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from headlab.config import register_configs

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


def compose_checked(compose: Callable[..., Any], config_name: str, overrides: Sequence[str], **kwargs: Any) -> Any:
    """`compose(config_name, overrides=...)`, a composition error as the one ConfigError `explain` words."""
    try:
        return compose(config_name, overrides=list(overrides), **kwargs)
    except Exception as err:
        explained = explain(err, overrides)
        if explained is None:
            raise
        raise explained from None


def compose_train(overrides: Sequence[str], *, return_hydra_config: bool = False) -> Any:
    """headlab-train's config for `overrides`, as `headlab-train overrides...` composes it; no files written."""
    from hydra import compose

    with composing():
        return compose_checked(compose, "train", overrides, return_hydra_config=return_hydra_config)


def store_schema(config_name: str, schema: Any) -> None:
    """A command's schema in Hydra's ConfigStore as `<config_name>_schema` (None: the command has none)."""
    if schema is not None:
        from hydra.core.config_store import ConfigStore

        ConfigStore.instance().store(name=f"{config_name}_schema", node=schema)


def store_tool_config(prog: str, config_name: str, header: str, footer: str) -> None:
    """A tool command's primary config in Hydra's ConfigStore: its schema, `conf/hydra/tool.yaml` (writes only
    into the folders it is given, every job of a -m checked first), no logging of Hydra's own, and its
    `--help` text; the name Hydra's `-m` folder and the run check know it by is `config_name`."""
    from hydra.core.config_store import ConfigStore

    defaults = [f"{config_name}_schema", {"hydra": "tool"}, {"override hydra/job_logging": "none"},
                {"override hydra/hydra_logging": "none"}, "_self_"]
    hydra = {"job": {"name": config_name}, "help": {"app_name": prog, "header": header, "footer": footer}}
    ConfigStore.instance().store(name=config_name, node={"defaults": defaults, "hydra": hydra})


def _multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
