"""The train schemas: registered once, named by conf/'s group files, typing what they declare, and
composing every shipped command line exactly as before they existed."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from importlib.resources import files
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from headlab.config import register_configs
from headlab.config.app import compose_train
from headlab.config.train_schema import DATA_SCHEMAS, SCHEMAS, ModelSchema, TrainKeys
from headlab.config.validate import validate_config
from headlab.errors import ConfigError
from headlab.model import ModelConfig

# sha1 of each command line's composed config (its YAML without hydra:, then hydra.runtime.choices),
# composed by the code before the schemas (commit 96b4cca, /work/base); regenerate only for a
# change that means to alter what a command line composes (it changes config_digest and resume).
BEFORE = json.loads((Path(__file__).parent / "composed_before_schemas.json").read_text())


def test_register_configs_stores_every_schema_once_and_can_be_called_again():
    register_configs()
    register_configs()
    repo = ConfigStore.instance().repo["schema"]
    assert {"model.yaml", "paths.yaml", "intervention.yaml"} <= set(repo)
    assert set(repo["data"]) == {"zh_reviews.yaml", "synthetic.yaml", "multidomain.yaml", "en_polarity.yaml", "files.yaml", "repeat_tokens.yaml", "zh_reviews_lm.yaml", "files_lm.yaml"}
    assert "model_lm.yaml" in repo
    assert len(SCHEMAS) == 18


def test_the_model_schema_is_model_config_less_what_the_data_supplies():
    names = [f.name for f in dataclasses.fields(ModelSchema)]
    expected = [f.name for f in dataclasses.fields(ModelConfig)
                if f.name not in ("vocab_size", "n_classes", "pad_id", "n_domains")]
    assert names == ["_target_", *expected]
    built = ModelConfig(vocab_size=4, n_classes=2, max_len=8)  # the reference: ModelConfig's own defaults
    composed = compose_train([]).model
    for name in expected[1:]:  # max_len comes from data.max_len
        assert composed[name] == getattr(built, name), name


@pytest.mark.parametrize("source", ["zh_reviews", "synthetic", "multidomain", "files"])
def test_each_data_file_names_its_schema(source):
    cfg = compose_train([f"data={source}"])
    assert OmegaConf.get_type(cfg.data) is DATA_SCHEMAS[source]
    assert cfg.data.source == source


def test_train_keys_are_train_yamls_own_keys():
    train = OmegaConf.load(str(files("headlab.conf") / "train.yaml"))
    own = [key for key in train if key not in ("defaults", "module", "hydra")]
    assert own == [f.name for f in dataclasses.fields(TrainKeys)]
    assert {f.name: f.default for f in dataclasses.fields(TrainKeys) if f.default is not dataclasses.MISSING} == {
        key: train[key] for key in own if key not in ("tags", "resume_allow")}


def test_a_closed_schema_refuses_an_unknown_key_and_a_wrong_type_at_composition():
    with pytest.raises(ConfigError, match=r"^invalid config model\.n_head=3: expected a key of model \(did you mean n_heads\?\)$"):
        compose_train(["model.n_head=3"])
    with pytest.raises(ConfigError, match=r"^invalid config optim\.warmup_steps='ten': expected an integer or null$"):
        compose_train(["optim.warmup_steps=ten"])
    with pytest.raises(ConfigError, match=r"^invalid config optim\.betas=\['a', 0\.9\]: expected a list of numbers$"):
        compose_train(["optim.betas=[a,0.9]"])


def test_the_data_node_takes_its_options_and_nothing_else():
    cfg = compose_train(["data=synthetic", "+data.train_fraction=0.2"])
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


# ---- schema_of: each schema derived from the signature of the class it configures ----------------------------
def _imported_parameters(dotted: str) -> dict[str, tuple[object, object]]:
    """The reference: the class imported and inspected (its bases' __init__ where it passes **kwargs on)."""
    import inspect
    import typing

    from hydra.utils import get_object

    found: dict[str, tuple[object, object]] = {}
    target = get_object(dotted)
    for owner in (target.__mro__ if inspect.isclass(target) else (target,)):
        function = owner.__init__ if inspect.isclass(target) else owner
        if inspect.isclass(target) and "__init__" not in vars(owner):
            continue
        hints = typing.get_type_hints(function)
        signature = inspect.signature(function)
        for name, p in signature.parameters.items():
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name != "self":
                found.setdefault(name, (hints.get(name), p.default))
        if not any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
            break
    return found


@pytest.mark.parametrize("name", [name for name, schema, _ in SCHEMAS if "_target_" in {f.name for f in dataclasses.fields(schema)}])
def test_a_schema_types_each_key_as_the_imported_class_does(name):
    import inspect

    from headlab.config.train_schema import _schema_type, parameters

    schema = dict((n, s) for n, s, _ in SCHEMAS)[name]
    target = schema._target_
    reference = _imported_parameters(target)
    read = parameters(target)
    for spec in dataclasses.fields(schema):
        if spec.name == "_target_" or dataclasses.is_dataclass(spec.type):
            continue
        assert _schema_type(read[spec.name][0]) == _schema_type(reference[spec.name][0]), spec.name
        if name.startswith("model"):  # the model's schemas carry ModelConfig's defaults
            default = reference[spec.name][1]
            assert spec.default == (MISSING if default is inspect.Parameter.empty else default), spec.name


def test_parameters_follow_kwargs_to_the_base_class_and_read_a_dataclass_s_fields():
    from headlab.config.train_schema import parameters

    files_lm = parameters("headlab.data.lm_datamodule.FilesLMDataModule")
    assert list(files_lm)[:2] == ["max_len", "batch_size"] and "files" in files_lm  # TextLMDataModule's, then its own
    assert files_lm["max_len"][1] == 65 and files_lm["probe_vocab"][1] == 256
    model = parameters("headlab.model.ModelConfig")
    assert model["n_heads"][1] == 4 and model["d_head"][1] is None and model["vocab_size"][1] == MISSING



def test_a_key_added_to_a_node_is_checked_against_the_signature_less_what_the_code_passes():
    from headlab.config.signature import check_target

    check_target("data", {"_target_": "headlab.data.TextDataModule", "tokenizer": "word", "synthetic": {"marker": "z"}})
    with pytest.raises(ConfigError, match=r"^invalid config data\.synthetic\.seed=1: expected a key of data\.synthetic"):
        check_target("data", {"_target_": "headlab.data.TextDataModule", "synthetic": {"seed": 1}})  # data.seed seeds it
    with pytest.raises(ConfigError, match=r"^invalid config callbacks\.head_metrics\.run_id='x': expected a key of"):
        check_target("callbacks.head_metrics", {"_target_": "headlab.lit.callbacks.HeadMetricsCallback", "run_id": "x"})
    with pytest.raises(ConfigError, match=r"^invalid config model\.vocab_size=5: expected a key of model"):
        check_target("model", {"_target_": "headlab.model.ModelConfig", "vocab_size": 5})


def test_a_conf_key_the_class_does_not_take_is_named_when_the_schema_is_built():
    from headlab.config.train_schema import schema_of

    with pytest.raises(TypeError, match="headlab.lit.schedule.WarmupSchedule takes no parameter 'warmup_step'"):
        schema_of("headlab.lit.schedule.WarmupSchedule", ["schedule", "warmup_step"], "Broken")
