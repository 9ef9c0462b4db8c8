"""Every console script is a Hydra app over a structured-config schema, run the same way.

`run_app` gives each command what `headlab-train` has: one override grammar (`key=value`, `-m
key=a,b` for one job per value), `--cfg job`, `--help` listing its groups and keys, and a config
checked before anything runs: a wrong key, type or choice is one line naming it and exit 2 (Hydra's
own report is several lines with a hint to set HYDRA_FULL_ERROR). The command's function receives
the typed object (`OmegaConf.to_object`), so the schema's `__post_init__` range checks have run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from headlab.errors import ConfigError, HeadlabError

EXIT_CONFIG = 2
CONFIG_MODULE = "headlab.conf"


def run_app(prog: str, config_name: str, task: Callable[[Any], int | None], argv: Sequence[str] | None = None,
            config_module: str = CONFIG_MODULE, schema: Any = None) -> int:
    """Run `task(typed_config)` as a Hydra app over `conf/<config_name>.yaml`, whose defaults list names
    `schema` (the command's dataclass, kept beside the work it configures) as `<config_name>_schema`.

    Returns the exit code: `task`'s (None = 0), 2 for a config or input mistake (one line on stderr).
    """
    import hydra

    from headlab.config.run_check import typed

    store_schema(config_name, schema)
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
    run before anything is written (`headlab.config.run_check`, the CheckedSweeper), or a command line
    Hydra could not compose, explained with the key to fix by `check_overrides`.
    """
    from headlab.config import register_configs
    from headlab.config.overrides import check_overrides, flatten
    from headlab.config.run_check import ConfigRefused

    register_configs()
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

        try:
            check_overrides(list(args), config_name, config_module)
        except HeadlabError as explained:
            mistake = explained
        else:
            if not isinstance(err, (HydraException, OmegaConfBaseException)):
                raise  # a failure that is no config mistake: the exception as it is
            mistake = ConfigError("command line", " ".join(args), f"what Hydra accepts ({flatten(err)})")
    finally:
        sys.argv = saved_argv
        os.environ.pop("HYDRA_FULL_ERROR", None)
        if saved_env is not None:
            os.environ["HYDRA_FULL_ERROR"] = saved_env
    print(f"{prog}: error: {mistake}", file=sys.stderr)
    return EXIT_CONFIG


def store_schema(config_name: str, schema: Any) -> None:
    """A command's schema in Hydra's ConfigStore as `<config_name>_schema` (None: the command has none)."""
    if schema is not None:
        from hydra.core.config_store import ConfigStore

        ConfigStore.instance().store(name=f"{config_name}_schema", node=schema)


def compose_command(config_name: str, overrides: Sequence[str], config_module: str = CONFIG_MODULE,
                    schema: Any = None) -> Any:
    """The config a command composes from `overrides` (for tests and the reproduce runner's checks),
    checked as a run checks it before anything is written; a bad override is one ConfigError."""
    from hydra import compose

    store_schema(config_name, schema)
    from headlab.config.overrides import compose_checked, composing
    from headlab.config.run_check import check_composed

    with composing(config_module):
        cfg = compose_checked(compose, config_name, list(overrides))
    check_composed(config_name, cfg)
    return cfg


def _multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


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
