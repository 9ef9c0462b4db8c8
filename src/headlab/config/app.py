"""Every console script is a Hydra app over a structured-config schema, run the same way.

`run_app` gives each command what `headlab-train` has: one override grammar (`key=value`, `-m
key=a,b` for one job per value), `--cfg job`, `--help` listing its groups and keys, and a config
checked before anything runs: a wrong key, type or choice is one line naming it and exit 2 (Hydra's
own report is several lines with a hint to set HYDRA_FULL_ERROR). The command's function receives
the typed object (`OmegaConf.to_object`), so the schema's `__post_init__` range checks have run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from headlab.config.messages import first_line
from headlab.errors import ConfigError, HeadlabError

EXIT_CONFIG = 2
CONFIG_MODULE = "headlab.conf"
# Flags after which Hydra prints information instead of running: nothing to check first.
INFO_FLAGS = {"-h", "--help", "--hydra-help", "-c", "--cfg", "-i", "--info", "--version", "-sc", "--shell-completion"}


def run_app(prog: str, config_name: str, task: Callable[[Any], int | None], argv: Sequence[str] | None = None,
            config_module: str = CONFIG_MODULE) -> int:
    """Check the command line against `conf/<config_name>.yaml`, then run `task(typed_config)` as a Hydra app.

    Returns the exit code: `task`'s (None = 0), 2 for a config or input mistake (one line on stderr).
    """
    import hydra

    from headlab.config import register_configs

    register_configs()
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if not {a.split("=", 1)[0] for a in args} & INFO_FLAGS:
            check_command_line(config_name, args, config_module)
    except HeadlabError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return EXIT_CONFIG
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

    saved = sys.argv
    sys.argv = [prog, *args]
    try:
        _main()
    finally:
        sys.argv = saved
    return int(outcome["code"])


def typed(cfg: Any) -> Any:
    """The schema's object for a composed config (its `__post_init__` checks run); a missing mandatory
    value or a wrong type is a ConfigError naming the key."""
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

    try:
        return OmegaConf.to_object(cfg)
    except MissingMandatoryValue as err:
        raise ConfigError(str(err.full_key), None, f"a value ({err.full_key} has no default): {err.full_key}=...") from None
    except OmegaConfBaseException as err:
        raise ConfigError(str(getattr(err, "full_key", "") or "config"), None, first_line(err)) from None


def compose_command(config_name: str, overrides: Sequence[str], config_module: str = CONFIG_MODULE) -> Any:
    """The config a command composes from `overrides` (for tests and the reproduce runner's checks),
    checked and typed as `run_app` checks it; a bad override is one ConfigError."""
    from hydra import compose, initialize_config_module

    from headlab.config import register_configs
    from headlab.config.overrides import compose_checked

    register_configs()
    with initialize_config_module(config_module, version_base="1.3"):
        cfg = compose_checked(compose, config_name, list(overrides))
    typed(cfg)
    return cfg


def check_command_line(config_name: str, args: list[str], config_module: str = CONFIG_MODULE) -> None:
    """The overrides composed (and typed) before Hydra starts: each value of a `-m` sweep too."""
    from hydra import compose, initialize_config_module

    from headlab.config.overrides import compose_checked, override_args, parse_override, refuse_sweeps_without_multirun, sweep_jobs

    overrides = override_args(args)
    refuse_sweeps_without_multirun([parse_override(o) for o in overrides], bool({"-m", "--multirun"} & set(args)))
    with initialize_config_module(config_module, version_base="1.3"):
        for job in sweep_jobs(overrides):
            typed(compose_checked(compose, config_name, job))


def _multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def positional_args(args: Sequence[str], positional: str | None, flags: dict[str, str] | None = None, *,
                    switches: dict[str, str] | None = None, lists: dict[str, str] | None = None,
                    repeated: dict[str, str] | None = None, mappings: dict[str, str] | None = None) -> list[str]:
    """The documented short forms as overrides: a leading `PATH` is `positional=PATH`, and each
    `--flag VALUE` (or `--flag=VALUE`) in `flags` is `key=VALUE`, so `headlab-importance RUN --checkpoint all`
    is `headlab-importance run_dir=RUN checkpoint=all`. Values are quoted where Hydra's grammar needs it.

    The argparse forms older commands documented: `switches` are flags without a value, each one
    override; `lists` take `A,B` for a list key; `repeated` flags may come several times and gather
    their values into one list; `mappings` take `NAME=VALUE` (repeatable), one entry of a mapping each
    (`++` adds the entry, or replaces an earlier one, as argparse's last value won):

    >>> positional_args(["sweeps/a", "--out", "my out", "--no-figures"], "sweep_dir", {"--out": "out"},
    ...                 switches={"--no-figures": "figures=false"})
    ['sweep_dir=sweeps/a', "out='my out'", 'figures=false']
    >>> positional_args(["--only", "c8,C10", "--override", "seed=0,1", "--override=a=b", "--evidence", "heads=d"],
    ...                 None, lists={"--only": "only"}, repeated={"--override": "override"},
    ...                 mappings={"--evidence": "evidence"})
    ['only=[c8,C10]', "override=['seed=0,1','a=b']", '++evidence.heads=d']
    """
    flags, switches, lists = flags or {}, switches or {}, lists or {}
    repeated, mappings = repeated or {}, mappings or {}
    out: list[str] = []
    gathered: dict[str, tuple[int, list[str]]] = {}  # a repeated flag's key -> (its place in out, its values)
    it = iter(args)
    for arg in it:
        name, eq, value = arg.partition("=")
        if name in flags or name in lists or name in repeated or name in mappings:
            value = value if eq else next(it, "")
        if name in flags:
            out.append(f"{flags[name]}={quote(value)}")
        elif arg in switches:
            out.append(switches[arg])
        elif name in lists:
            out.append(f"{lists[name]}=[{value}]")
        elif name in repeated:
            if repeated[name] not in gathered:
                gathered[repeated[name]] = (len(out), [])
                out.append("")  # the list's place, filled below
            gathered[repeated[name]][1].append(value)
        elif name in mappings:
            entry, _, item = value.partition("=")
            out.append(f"++{mappings[name]}.{entry}={quote(item) if item else ''}")
        elif positional and not out and not arg.startswith("-") and "=" not in arg:
            out.append(f"{positional}={quote(arg)}")
        else:
            out.append(arg)
    for key, (place, values) in gathered.items():
        out[place] = f"{key}=[{','.join(_quote_item(v) for v in values)}]"
    return out


def _quote_item(value: str) -> str:
    """A list item always quoted: `a=b` or `0,1` inside `[...]` would read as grammar."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


_PLAIN = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:~+@%")


def quote(value: str) -> str:
    """A path as a value Hydra's override grammar reads back unchanged.

    >>> quote("logs/runs/2026-12-01_10-00-00_000001"), quote("my runs/a,b")
    ('logs/runs/2026-12-01_10-00-00_000001', "'my runs/a,b'")
    """
    if value and set(value) <= _PLAIN:
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
