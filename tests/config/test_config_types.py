"""Every leaf key of every config group, given a value of the wrong type, is one ConfigError line.

In-process, as `headlab-train key=value` meets it: compose with the override (a schema rejects a
wrong type there), then `validate_config` (as `train()` does first; it checks the keys a schema
does not type). The keys come from the composed configs themselves, so a key added to any group is covered.
"""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from headlab.config.app import compose_train
from headlab.tasks.train_config import validate_config
from headlab.errors import ConfigError

# One config per data source, with every logger and the default callbacks.
BASES = {
    "zh_reviews": ["data=zh_reviews", "logger=many"],
    "synthetic": ["data=synthetic", "logger=many"],
    "files": ["data=files", "data.files.train=/tmp/train.csv", "logger=many"],
}
# Keys whose consumer's signature also accepts text (Lightning's Union[..., str]): a string is no
# type mistake there, Lightning reads it; a mapping still is.
TAKES_TEXT = {"trainer.devices", "trainer.val_check_interval", "trainer.max_time", "trainer.strategy",
              "logger.csv.version", "logger.tensorboard.version", "callbacks.model_checkpoint.save_last"}
# ... and also a mapping (Lightning reads {hours: 1} as a time span): a list is wrong there.
TAKES_MAPPING = {"trainer.val_check_interval", "trainer.max_time"}
NOT_A_KEY = {"hydra", "paths"}


def compose_base(overrides: list[str]) -> DictConfig:
    GlobalHydra.instance().clear()
    with initialize_config_module("headlab.conf", version_base="1.3"):
        return compose("train", overrides=overrides)


def leaf_keys(cfg: DictConfig) -> list[tuple[str, object]]:
    """(dotted key, value) of every leaf a user can set: not `_target_`-style keys, not `${...}`
    references to another key (those are reported under the key they point to)."""
    leaves = []

    def walk(node: DictConfig, path: str) -> None:
        for key in node.keys():
            full = f"{path}.{key}" if path else str(key)
            if full in NOT_A_KEY or (str(key).startswith("_") and str(key).endswith("_")):
                continue
            raw = node._get_node(key)._value()
            if isinstance(raw, str) and raw.startswith("${") and raw.endswith("}") and raw.count("${") == 1:
                continue
            value = node._get_node(key)
            if isinstance(value, DictConfig):
                walk(value, full)
            else:
                leaves.append((full, OmegaConf.to_container(value) if OmegaConf.is_list(value) else raw))

    walk(cfg, "")
    return leaves


def wrong_values(key: str, value: object) -> list[object]:
    """A mapping is the wrong type for every leaf; text also for numbers and booleans."""
    wrong: list[object] = [[1, 2]] if key in TAKES_MAPPING else [{"a": 1}]
    if isinstance(value, (bool, int, float)) and key not in TAKES_TEXT:
        wrong.append("abc")
    return wrong


def cases() -> list[tuple[str, str, object]]:
    out = []
    for base, overrides in BASES.items():
        for key, value in leaf_keys(compose_base(overrides)):
            if base != "synthetic" and not key.startswith("data."):
                continue  # the groups other than data are the same in every base
            out += [(base, key, wrong) for wrong in wrong_values(key, value)]
    return out


CASES = cases()


def as_override(value: object) -> str:
    """A value as the command line writes it: {a: 1} -> {a:1}, ['a', 1] -> [a,1]."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{as_override(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(as_override(v) for v in value) + "]"
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    return str(value)


def validate(base: str, *overrides: str) -> None:
    """`headlab-train <base> overrides...` up to training: compose, then validate."""
    validate_config(compose_train([*BASES[base], *overrides]))


def with_value(base: str, key: str, value: object) -> None:
    validate(base, f"{key}={as_override(value)}")


def test_every_group_is_covered():
    keys = {key for _, key, _ in CASES}
    for prefix in ("trainer.", "optim.", "model.", "data.synthetic.", "data.files.", "callbacks.head_metrics.",
                   "callbacks.model_checkpoint.", "callbacks.checkpoint.", "callbacks.lr_monitor.",
                   "logger.csv.", "logger.tensorboard.", "logger.wandb."):
        assert any(k.startswith(prefix) for k in keys), prefix
    assert {"seed", "resume", "threads", "tags", "optim.lr", "optim.betas", "trainer.max_epochs"} <= keys
    assert len(CASES) > 150


@pytest.mark.parametrize("base, key, wrong", CASES, ids=[f"{b}:{k}={w!r}" for b, k, w in CASES])
def test_wrong_type_is_one_line_naming_the_key(base, key, wrong):
    with pytest.raises(ConfigError) as info:
        with_value(base, key, wrong)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"invalid config {key}=") and ": expected " in message, message
    assert repr(wrong) in message or str(wrong) in message


@pytest.mark.parametrize("base", list(BASES))
def test_the_shipped_configs_pass(base):
    validate_config(compose_base(BASES[base]))


@pytest.mark.parametrize("betas", [[0.9], [0.9, 0.98, 0.99], []])
def test_a_list_of_the_wrong_length_names_the_length(betas):
    with pytest.raises(ConfigError, match=r"invalid config optim\.betas=.*: expected a list of 2 numbers"):
        with_value("synthetic", "optim.betas", betas)


def test_a_missing_mandatory_value_names_the_key_and_shows_an_example():
    with pytest.raises(ConfigError) as info:
        validate_config(compose_base(["data=files"]))
    message = str(info.value)
    assert message.startswith("invalid config data.files.train='???': expected a value")
    assert "data.files.train=/path/to/train.csv" in message


@pytest.mark.parametrize("key, value, expected", [
    ("trainer.max_epochs", "abc", "expected an integer or null"),
    ("trainer.precision", "64-bit", "expected one of 64, 32, 16, transformer-engine"),
    ("callbacks.lr_monitor.logging_interval", "steps", "expected one of step, epoch or null"),
    ("resume", "maybe", "expected one of true, false or auto"),
    ("model.pos_encoding", {"a": 1}, "expected one of none, sinusoidal, learned, rope, alibi"),  # ModelConfig's Literal
    ("model.pos_encoding", 3, "expected one of none, sinusoidal, learned, rope, alibi"),  # 3 reads as text '3'
    ("model.n_head", 3, "expected a key of model (did you mean n_heads?)"),
    ("data.synthetic.size", 3, "expected a key of data.synthetic (one of n, min_len, max_len, marker"),  # the reader's parameters
    ("data.max_len", 1.5, "expected an integer"),
    ("callbacks.head_metrics.query_tokens", {"a": 1}, "expected a list (a mapping cannot replace the list"),  # Hydra's merge refuses it
    ("tags", ["a", 1], "expected a list of strings"),
])
def test_the_message_says_what_to_type(key, value, expected):
    with pytest.raises(ConfigError) as info:
        with_value("synthetic", key, value)
    assert expected in str(info.value)


def test_progress_bar_off_with_the_rich_bar_configured_is_one_line():
    with pytest.raises(ConfigError) as info:
        with_value("synthetic", "trainer.enable_progress_bar", False)
    assert str(info.value) == ("invalid config trainer.enable_progress_bar=False: expected true while "
                               "callbacks.progress_bar is set: for no progress bar, also pass callbacks.progress_bar=null")
    validate("synthetic", "trainer.enable_progress_bar=false", "callbacks.progress_bar=null")


@pytest.mark.parametrize("key, value, fragment", [
    ("callbacks.model_checkpoint.mode", "maximum", "`mode` can be min, max"),  # Lightning's own check
    ("callbacks.head_metrics.every_n_steps", 0, "an integer > 0"),  # the callback's own check
    ("model.n_heads", 3, "a divisor of d_model=128"),  # ModelConfig's own check
    ("data.val_fraction", 0.95, "data.val_fraction"),  # the datamodule's own check
])
def test_value_ranges_come_from_the_constructors_that_own_them(key, value, fragment):
    with pytest.raises(ConfigError) as info:
        with_value("synthetic", key, value)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_an_unknown_added_key_names_the_closest_parameter():
    with pytest.raises(ConfigError, match=r"invalid config trainer\.max_epoch=3: expected a parameter of "
                                          r"lightning\.pytorch\.trainer\.trainer\.Trainer \(did you mean max_epochs\?\)"):
        with_value("synthetic", "+trainer.max_epoch", 3)  # + : Hydra itself refuses a new key without it


def shipped_options() -> list[list[str]]:
    """One override list per option of each group a user picks (conf/<group>/*.yaml)."""
    from importlib.resources import files

    root = files("headlab.conf")
    out = []
    for group in ("optim", "callbacks", "logger", "experiment", "debug"):
        for option in sorted(p.name[:-5] for p in (root / group).iterdir() if p.name.endswith(".yaml")):
            out.append(["data=synthetic", f"{group}={option}"] if group != "experiment" else [f"experiment={option}"])
            if option == "sweep_files":  # a base for the user's own file: its one mandatory key
                out[-1].append("data.files.train=/data/my.csv")
    return out


@pytest.mark.parametrize("overrides", shipped_options(), ids=lambda o: o[-1])
def test_every_shipped_option_passes(overrides):
    validate_config(compose_base(overrides))
