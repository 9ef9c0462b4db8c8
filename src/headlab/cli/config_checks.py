"""Config mistakes become one line (`headlab.errors.ConfigError`, exit 2) before anything runs.

`check_overrides` looks at the command line before Hydra composes it (unknown group options);
`validate_config` checks the composed config before any data is loaded or any file written.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from headlab.errors import ConfigError


def check_overrides(args: list[str]) -> None:
    """The command line's overrides, checked before Hydra runs, so a typo costs one line."""
    _check_group_choices(args)


def validate_config(cfg: DictConfig) -> None:
    """Check what can be checked before data loading, so a typo costs milliseconds."""
    from headlab.model import ModelConfig

    max_len = cfg.data.get("max_len")
    if not isinstance(max_len, int) or max_len < 2:
        raise ConfigError("data.max_len", max_len, "an integer >= 2")
    model_fields = OmegaConf.to_container(cfg.model, resolve=True)
    model_fields.pop("compile", None)
    ModelConfig(vocab_size=4, n_classes=2, max_len=max_len, **model_fields)
    if not isinstance(cfg.seed, int) or cfg.seed < 0:
        raise ConfigError("seed", cfg.seed, "an integer >= 0")
    lr = cfg.optim.get("lr")
    if not isinstance(lr, (int, float)) or lr <= 0:
        raise ConfigError("optim.lr", lr, "a learning rate > 0")
    max_epochs, max_steps = cfg.trainer.get("max_epochs"), cfg.trainer.get("max_steps", -1)
    if max_steps in (-1, None) and isinstance(max_epochs, int) and max_epochs < 1:
        raise ConfigError("trainer.max_epochs", max_epochs, "an integer >= 1 (or set trainer.max_steps)")


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
    if not candidates:
        return
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    with initialize_config_module("headlab.conf", version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        for key, value in candidates:
            options = loader.get_group_options(key)
            if not options:
                continue  # not a config group
            for choice in value.split(","):
                if choice not in options and choice != "null":
                    raise ConfigError(key, choice, f"one of {', '.join(sorted(options))} (the config group {key}/)")
