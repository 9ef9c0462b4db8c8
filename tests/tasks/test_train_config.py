"""headlab-train's config has no schema copied from code: the groups' files name their `_target_`, whose
signature is the schema (checked after composition), the top level is TrainKeys; every shipped command
line composes exactly as before (digests recorded before the first schemas)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from importlib.resources import files
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from headlab.config.app import compose_train
from headlab.config.signature import SUPPLIED, check_target, parameters
from headlab.tasks.train_config import TrainKeys
from headlab.tasks.train_config import validate_config
from headlab.errors import ConfigError
from headlab.model import ModelConfig
from headlab.model.lm import LMConfig

# sha1 of each command line's composed config (its YAML without hydra:, then hydra.runtime.choices),
# composed by the code before the schemas (commit 96b4cca, /work/base); regenerate only for a
# change that means to alter what a command line composes (it changes config_digest and resume).
BEFORE = json.loads((Path(__file__).parents[1] / "config" / "composed_before_schemas.json").read_text())


@pytest.mark.parametrize(("option", "config"), [("default", ModelConfig), ("lm", LMConfig)])
def test_the_model_files_are_the_config_class_less_what_the_data_supplies(option, config):
    """conf/model/ writes every parameter out (a user sees them in --cfg job): the names, their order and
    their defaults are the class's own, so a field added or a default changed in code fails here."""
    name = f"{config.__module__.rpartition('.')[0] if config is ModelConfig else config.__module__}.{config.__name__}"
    expected = [f.name for f in dataclasses.fields(config) if f.name not in SUPPLIED[name]]
    composed = compose_train([f"model={option}"]).model
    assert [k for k in composed if k != "_target_"] == expected
    built = config(vocab_size=4, max_len=8, **({"n_classes": 2} if config is ModelConfig else {}))
    for key in expected[1:]:  # max_len comes from data.max_len
        assert composed[key] == getattr(built, key), key


def test_train_keys_are_train_yamls_own_keys():
    train = OmegaConf.load(str(files("headlab.conf") / "train.yaml"))
    own = [key for key in train if key not in ("defaults", "module", "hydra")]
    assert own == [f.name for f in dataclasses.fields(TrainKeys)]
    assert {f.name: f.default for f in dataclasses.fields(TrainKeys) if f.default is not dataclasses.MISSING} == {
        key: train[key] for key in own if key not in ("tags", "resume_allow")}


def test_an_unknown_key_or_a_wrong_type_is_one_line():
    with pytest.raises(ConfigError, match=r"^invalid config model\.n_head=3: expected a key of model \(did you mean n_heads\?\)$"):
        compose_train(["model.n_head=3"])
    with pytest.raises(ConfigError, match=r"^invalid config optim\.warmup_steps='ten': expected an integer or null$"):
        validate_config(compose_train(["optim.warmup_steps=ten"]))
    with pytest.raises(ConfigError, match=r"^invalid config optim\.betas=\['a', 0\.9\]: expected a list of 2 numbers, e\.g\. \[0\.9, 0\.999\]$"):
        validate_config(compose_train(["optim.betas=[a,0.9]"]))


def test_a_knob_no_interpolation_reads_is_refused_naming_the_close_key():
    with pytest.raises(ConfigError, match=r"^invalid config optim\.lrr=1: expected a key of optim \(did you mean lr\?\)$"):
        validate_config(compose_train(["+optim.lrr=1"]))
    with pytest.raises(ConfigError, match=r"^invalid config distill\.alfa=1: expected a key of distill \(did you mean alpha\?\)$"):
        validate_config(compose_train(["+distill=default", "teacher=x", "+distill.alfa=1"]))


def test_the_data_node_takes_its_options_and_nothing_else():
    cfg = compose_train(["data=synthetic", "data.train_fraction=0.2"])  # a parameter of the datamodule: no `+` needed
    assert cfg.data.train_fraction == 0.2
    validate_config(cfg)
    with pytest.raises(ConfigError, match=r"^invalid config data\.train_fractoin=0\.2: expected a key of data "
                                          r"\(did you mean train_fraction\?\)$"):
        validate_config(compose_train(["data=synthetic", "+data.train_fractoin=0.2"]))
    with pytest.raises(ConfigError, match=r"^invalid config data\.train_labels='many': expected an integer or null$"):
        validate_config(compose_train(["data=synthetic", "+data.train_labels=many"]))
    with pytest.raises(ConfigError, match=r"^invalid config data\.synthetic\.count=1: expected a key of data\.synthetic"):
        validate_config(compose_train(["data=synthetic", "+data.synthetic.count=1"]))
    validate_config(compose_train(["data=synthetic", "+data.synthetic.marker=z", "+callbacks.checkpoint.keep_every_n_train_steps=5"]))
    with pytest.raises(ConfigError, match=r"^invalid config model\.extra=1: expected a key of model"):
        validate_config(compose_train(["+model.extra=1"]))


# Keys added to the shipped configs after composed_before_schemas.json was recorded: left out of the
# digest, so it still checks that the schemas changed nothing else (each with the change that added it).
ADDED_KEYS = (
    ("figures",),  # one switch for every measuring callback's per-run figures (the LM's too; issue 31's LM sweeps)
    ("callbacks", "head_metrics", "probe_patterns"),  # headlab-view's token view (issue 23)
    ("callbacks", "head_metrics", "probe_pattern_len"),
    ("callbacks", "head_metrics", "view"),
    ("overwrite",),  # a fresh start over an existing run only when asked (issue 24): a switch, not a setting
    ("data", "tokenizer"),  # data=files: char (as before) or word (issue 35)
    ("data", "files", "text_column"),  # data=files, files_lm: the column names, "text" and "label" as before (issue 35)
    ("data", "files", "label_column"),
)


def _digest(overrides: list[str]) -> str:
    with initialize_config_module("headlab.conf", version_base="1.3"):
        cfg = compose("train", overrides=overrides, return_hydra_config=True)
    choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
    # hydra/sweeper=checked (BasicSweeper checking every job before the first starts) was selected after
    # the digests were recorded, with basic's values: recorded as the basic sweeper it extends.
    assert choices.pop("hydra/sweeper") == "checked"
    choices["hydra/sweeper"] = "basic"
    plain = OmegaConf.to_container(cfg, resolve=False)
    plain.pop("hydra")
    for callback in ("head_metrics", "lm_metrics"):  # `figures: true` became `${figures}` (the added key's value)
        node = plain.get("callbacks", {}).get(callback) if isinstance(plain.get("callbacks"), dict) else None
        if isinstance(node, dict) and node.get("figures") == "${figures}":
            node["figures"] = plain["figures"]
    data = plain.get("data")
    if isinstance(data, dict) and str(data.get("_target_")).endswith("DataModule") and "source" in data:
        data["_target_"] = "headlab.data.TextDataModule"  # each classifier source its own class (issue 30): the one change
    for *parents, key in ADDED_KEYS:
        node = plain
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(key, None)
    text = OmegaConf.to_yaml(OmegaConf.create(plain)) + json.dumps(choices, sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()


@pytest.mark.parametrize("line", sorted(BEFORE))
def test_every_shipped_command_line_composes_as_before_the_schemas(line, monkeypatch):
    monkeypatch.delenv("HEADLAB_CONFIG_DIR", raising=False)
    overrides = [] if line == "(none)" else line.split(" ")
    assert _digest(overrides) == BEFORE[line]


# ---- the signature as the schema ---------------------------------------------------------------------------
def test_parameters_follow_kwargs_to_the_base_class_and_read_a_dataclass_s_fields():
    files_lm, var_kwargs, owner = parameters("data", "headlab.data.lm_datamodule.FilesLMDataModule")
    assert list(files_lm)[0] == "files" and {"max_len", "batch_size"} <= set(files_lm)  # its own, then TextLMDataModule's
    assert files_lm["max_len"].default == 65 and files_lm["probe_vocab"].default == 256
    assert not var_kwargs and owner is None  # headlab's own: its keys are named by their node
    model = parameters("model", "headlab.model.ModelConfig")[0]
    assert model["n_heads"].default == 4 and model["d_head"].default is None
    trainer, var_kwargs, owner = parameters("trainer", "lightning.pytorch.Trainer")
    assert owner == "lightning.pytorch.trainer.trainer.Trainer" and "max_epochs" in trainer and not var_kwargs


def test_a_key_added_to_a_node_is_checked_against_the_signature_less_what_the_code_passes():
    check_target("data", {"_target_": "headlab.data.TextDataModule", "tokenizer": "word", "synthetic": {"marker": "z"}})
    with pytest.raises(ConfigError, match=r"^invalid config data\.synthetic\.seed=1: expected a key of data\.synthetic"):
        check_target("data", {"_target_": "headlab.data.TextDataModule", "synthetic": {"seed": 1}})  # data.seed seeds it
    with pytest.raises(ConfigError, match=r"^invalid config callbacks\.head_metrics\.run_id='x': expected a key of"):
        check_target("callbacks.head_metrics", {"_target_": "headlab.lit.callbacks.HeadMetricsCallback", "run_id": "x"})
    with pytest.raises(ConfigError, match=r"^invalid config model\.vocab_size=5: expected a key of model"):
        check_target("model", {"_target_": "headlab.model.ModelConfig", "vocab_size": 5})
