"""The claim-spec schema (headlab.reproduce.spec_schema): every field's type is checked with a one-line
error naming it, unknown keys are refused with the close valid key, and the shipped specs load as
the typed objects the reproduce package reads."""

from __future__ import annotations

import copy
import dataclasses
import re
import typing
from enum import Enum
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from headlab.reproduce.spec_schema import (SCHEMA_GROUP, SCHEMA_NAME, ClaimSpecConfig, Measurement, MeasurementField,
                                       Reduction, RunCommand, StatisticKind, SweepProgram, load_claim_spec_config,
                                       register_claim_specs)
from headlab.errors import ConfigError
from headlab.reproduce.directions import MEASUREMENTS, cosine_summary
from headlab.reproduce.spec import RUN_COMMANDS, SWEEP_PROGRAMS, PerJob, load_spec, load_specs

SPECS = Path(__file__).resolve().parents[2] / "conf" / "reproduce"


def _base() -> dict:
    """C8's spec plus a per_job step and a teacher, so that every schema field has a place to go."""
    raw = OmegaConf.to_container(OmegaConf.load(SPECS / "c08_heads.yaml"))
    raw["evidence"]["per_job"] = [{"command": "headlab-prune", "args": ["prune.max_drop=0.005"]}]
    raw["evidence"]["quick"]["teacher"] = {"sweep_name": "heads-synthetic", "where": {"seed": 0}}
    return raw


def _leaves(tp=ClaimSpecConfig, path=()):
    """(key path, type) of every field of the schema, entering nested configs (statistics as `gap`,
    per_job as its first step)."""
    for f in dataclasses.fields(tp):
        hint = typing.get_type_hints(tp)[f.name]
        inner = next((a for a in typing.get_args(hint) if a is not type(None)), hint) \
            if typing.get_origin(hint) is typing.Union else hint
        origin, args = typing.get_origin(inner), typing.get_args(inner)
        if dataclasses.is_dataclass(inner):
            yield from _leaves(inner, (*path, f.name))
        elif origin is dict and dataclasses.is_dataclass(args[1]):
            yield from _leaves(args[1], (*path, f.name, "gap"))
        elif origin is list and dataclasses.is_dataclass(args[0]):
            yield from _leaves(args[0], (*path, f.name, 0))
        else:
            yield (*path, f.name), inner


def _wrong(tp):
    """A value of the wrong type for a field of type `tp` (and its text in a message)."""
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return "no_such_choice"
    if origin is list:
        element = typing.get_args(tp)[0]
        return ["not a number"] if element in (int, float) else 3
    if origin is dict:
        return 3
    return {bool: "maybe", int: "abc", float: "abc", str: [1, 2]}[tp]


def _put(raw: dict, path: tuple, value) -> dict:
    raw = copy.deepcopy(raw)
    at = raw
    for part in path[:-1]:
        at = at.setdefault(part, {}) if isinstance(part, str) else at[part]
    at[path[-1]] = value
    return raw


def _key_text(path: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p) for i, p in enumerate(path))


def _write(tmp_path: Path, raw: dict) -> Path:
    path = tmp_path / "c08_heads.yaml"
    path.write_text(OmegaConf.to_yaml(OmegaConf.create(raw)), encoding="utf-8")
    return path


LEAVES = list(_leaves())


def test_the_walk_reaches_every_kind_of_field():
    keys = {_key_text(p) for p, _ in LEAVES}
    assert {"claim", "version", "article.zh", "evidence.computed", "evidence.program", "evidence.quick.teacher.where",
            "evidence.per_job[0].quick_where", "statistics.gap.kind", "statistics.gap.bounds", "statistics.gap.seeds",
            "statistics.gap.field", "rule.supported_if", "notes", "evidence.cpu.sweep_name", "margin.value",
            "margin.direction", "prerequisite.rule", "seeds.confirmatory", "evidence.replication.sweep_name",
            "seeds.replication", "evidence.per_job[0].replication_where", "evidence.quick.teacher.sweep",
            "evidence.quick.teacher.overrides", "evidence.cpu.teacher.sweep", "evidence.full.teacher.overrides"} <= keys
    assert len(LEAVES) == 92  # 68 + the second look: a ScaleConfig (6), its per-job selection, its seeds; the alpha plan;
    # + the suites scale: a SuitesConfig (7); + how a teacher is trained (sweep, overrides) at each of the 4 scales (8)


@pytest.mark.parametrize("path, tp", LEAVES, ids=[_key_text(p) for p, _ in LEAVES])
def test_a_field_given_a_wrong_type_is_one_line_naming_the_file_the_key_and_the_value(tmp_path, path, tp):
    base = _base()
    assert load_claim_spec_config(_write(tmp_path, base))  # the base itself fits the schema
    bad = _wrong(tp)
    with pytest.raises(ConfigError) as err:
        load_claim_spec_config(_write(tmp_path, _put(base, path, bad)))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"invalid config c08_heads.yaml: {_key_text(path)}={bad!r}: expected "), message


@pytest.mark.parametrize("path, value, allowed", [
    (("statistics", "gap", "kind"), "ratio", "one of mean, paired_difference, group_difference, computed"),
    (("statistics", "gap", "reduce"), "sum", "one of mean, median, nan_fraction, fraction_in, distinct_per_layer, "
                                             "last_step_mean, last_step_max, first_step_max, fraction_at_most, "
                                             "settle_median"),
    (("statistics", "gap", "bounds"), [0, "one"], "[low, high]: the range the value can take (its interval is clipped to it)"),
    (("statistics", "gap", "seeds"), [0, "one"], "a list of integers"),
    (("statistics", "gap", "exclude"), {"final_role": "mixed"}, "a list of values"),
    (("evidence", "program"), "train_and_distill", "one of train, distill"),
    (("evidence", "quick", "overrides"), "seed=0,1", "a list of key=value overrides"),
    (("evidence", "per_job", 0, "args"), "prune.max_drop=0.005", "a list of key=value settings of the command"),
    (("evidence", "quick", "teacher", "where"), "seed=0", "a mapping of key -> value"),
    (("evidence", "quick", "teacher", "overrides"), "seed=0", "a list of key=value overrides"),
    (("version",), "first", "an integer >= 1"),
    (("rule", "supported_if"), ["gap.mean > 0"], "text"),
    (("evidence", "computed"), "maybe", "true or false"),
    (("article",), "words", "a mapping of zh, en"),
    (("evidence", "quick"), ["heads-synthetic"], "a mapping of sweep_name, overrides, teacher, run_name, command"),
    (("evidence", "per_job"), {"command": "headlab-prune"}, "a list of mappings of command, args, where, quick_where, "
                                                            "cpu_where, full_where, replication_where"),
    (("evidence", "per_job"), ["headlab-prune"], "a mapping of command, args, where, quick_where, cpu_where, full_where, replication_where"),
    (("statistics", "gap", "a"), ["model.n_heads=8"], "a mapping of key -> value"),
    (("statistics",), ["gap"], "a mapping of name -> a mapping of kind, column, where, a, b, reduce, values, exclude, "
                               "at_most, types, metric, bounds, measurement, seeds, args, field"),
])
def test_what_is_allowed_is_said_in_words(tmp_path, path, value, allowed):
    with pytest.raises(ConfigError) as err:
        load_claim_spec_config(_write(tmp_path, _put(_base(), path, value)))
    assert str(err.value).endswith(f"expected {allowed}"), str(err.value)


@pytest.mark.parametrize("path, close", [
    (("titel",), "title"),
    (("statistics", "gap", "bound"), "bounds"),
    (("evidence", "quick", "sweepname"), "sweep_name"),
    (("evidence", "per_job", 0, "quickwhere"), "quick_where"),
    (("rule", "supported"), "supported_if"),
])
def test_an_unknown_key_is_refused_naming_the_close_valid_key(tmp_path, path, close):
    with pytest.raises(ConfigError) as err:
        load_claim_spec_config(_write(tmp_path, _put(_base(), path, 1)))
    message = str(err.value)
    assert message.startswith(f"invalid config c08_heads.yaml: {_key_text(path)}=1: expected a known key: "
                              f"did you mean {close}? (allowed: ")
    assert "\n" not in message


def test_an_unknown_key_far_from_every_valid_one_lists_them(tmp_path):
    with pytest.raises(ConfigError, match=r"evidence\.zzz=1: expected a known key: \(allowed: sweep, run, computed, "):
        load_claim_spec_config(_write(tmp_path, _put(_base(), ("evidence", "zzz"), 1)))


@pytest.mark.parametrize("path", [("title",), ("version",), ("article", "en"), ("statistics", "gap", "kind"),
                                  ("evidence", "per_job", 0, "command"), ("evidence", "quick", "teacher", "where")])
def test_a_missing_required_key_is_named(tmp_path, path):
    raw = _base()
    at = raw
    for part in path[:-1]:
        at = at[part]
    del at[path[-1]]
    with pytest.raises(ConfigError, match=rf"^invalid config c08_heads\.yaml: {re.escape(_key_text(path))}=None: expected a value"):
        load_spec(_write(tmp_path, raw))


def test_an_empty_file_names_the_first_required_key_in_the_schemas_order(tmp_path):
    (tmp_path / "c01_x.yaml").write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^invalid config c01_x\.yaml: claim=None: expected a value \(required\)$"):
        load_spec(tmp_path / "c01_x.yaml")


def test_text_that_omegaconf_would_read_as_an_interpolation_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"c08_heads\.yaml: notes='see \$\{paths\.log_dir\}': expected text without"):
        load_spec(_write(tmp_path, _put(_base(), ("notes",), "see ${paths.log_dir}")))


def test_a_file_that_is_not_a_yaml_mapping_is_refused(tmp_path):
    (tmp_path / "c01_x.yaml").write_text("claim: [C1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^invalid config c01_x\.yaml='<file>': expected valid YAML"):
        load_spec(tmp_path / "c01_x.yaml")
    (tmp_path / "c01_x.yaml").write_text("- claim: C1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"expected a mapping of claim, version"):
        load_spec(tmp_path / "c01_x.yaml")


def test_all_18_shipped_specs_load_as_typed_objects_with_the_schemas_defaults():
    specs = {s.claim: s for s in load_specs(SPECS)}
    assert len(specs) == 18
    c1, c10, c11, c17 = specs["C1"], specs["C10"], specs["C11"], specs["C17"]
    assert c1.evidence.kind == "computed" and c1.evidence.figure == "angle_histogram.png"
    assert c1.statistics["init_band"].measurement is Measurement.initialised_queries
    assert c1.statistics["init_band"].field is MeasurementField.in_band
    assert c1.statistics["init_band"].seeds == list(range(10, 20))  # confirmatory seeds, set in the spec
    assert c10.per_job("quick") == (PerJob("headlab-prune", ("prune.ranking=ablation", "prune.max_drop=0.005",
                                                             "prune.selection=val_half"), ()),)
    assert c10.per_job("full")[0].where == ()  # version 7: the LM, every job pruned
    assert c10.statistics["pruned"].bounds == [0.0, 1.0] and c10.statistics["speedup"].bounds is None
    assert c10.program == "headlab-train" and c11.program == "headlab-distill"
    # since 2026-12-04 C11's teacher is trained by a one-job sweep of its own (teacher.sweep, teacher.overrides)
    assert c11.teacher("quick") == ("heads-zh_reviews-teacher", (("model.n_heads", 8), ("seed", 0)))
    assert c11.teacher_training("quick") == ("heads", "heads-zh_reviews-teacher",
                                             ("experiment=sweep_zh", "seed=0", "model.n_heads=8", "trainer.max_epochs=2",
                                              "data.max_len=64"))
    assert c11.teacher("cpu") == ("heads-zh_reviews-teacher-cpu", (("model.n_heads", 8), ("seed", 1000)))
    assert c11.teacher_training("cpu")[2][:3] == ("experiment=sweep_zh", "seed=1000", "model.n_heads=8")
    assert c11.teacher("full")[0] == c11.teacher_training("full")[1] == "heads-zh_reviews-teacher-full"
    # a teacher that is a job of another claim's sweep has no training of its own: the schema's defaults
    assert all(s.teacher_training(scale) is None for s in specs.values() if s is not c11 and s.evidence.kind == "sweep"
               for scale in ("quick", "cpu", "full") if getattr(s.evidence, scale) is not None)
    assert c17.evidence.run is RunCommand.analyze_hf and c17.run_command("full") == ("data=en_news", "threads=1")
    assert c17.statistics["deeper_farther"].a == {"layer": [3, 4, 5]} and c17.statistics["deeper_farther"].metric == "distance_norm"
    assert specs["C9"].statistics["earlier"].reduce is Reduction.median
    assert specs["C9"].statistics["earlier"].exclude == {"final_role": ["mixed"]}  # version 5: every head that ends with a role
    assert specs["C8"].statistics["gap"].kind is StatisticKind.paired_difference and specs["C8"].notes.startswith("A real")


def test_the_schemas_choices_are_the_ones_the_reproduce_package_can_run():
    assert {m.name for m in Measurement} == set(MEASUREMENTS)
    assert {f.name for f in MeasurementField} == set(cosine_summary(__import__("torch").tensor([0.0, 1.0])))
    assert set(SWEEP_PROGRAMS) == set(SweepProgram) and set(RUN_COMMANDS) == set(RunCommand)


def test_the_schema_is_registered_once_in_hydras_config_store_and_validates_there():
    from hydra.core.config_store import ConfigStore

    register_claim_specs()
    register_claim_specs()
    store = ConfigStore.instance()
    assert f"{SCHEMA_NAME}.yaml" in store.list(SCHEMA_GROUP)
    node = store.load(f"{SCHEMA_GROUP}/{SCHEMA_NAME}.yaml").node
    assert OmegaConf.get_type(node) is ClaimSpecConfig
    with pytest.raises(Exception, match="Invalid value 'ratio'"):
        OmegaConf.merge(node, {"statistics": {"gap": {"kind": "ratio"}}})


def test_evidence_must_be_exactly_one_kind_and_not_measured_needs_no_statistics(tmp_path):
    from headlab.reproduce.evidence import evaluate_claim
    from headlab.reproduce.verdict import NOT_MEASURED

    with pytest.raises(ConfigError, match=r"evidence=\['sweep', 'computed'\]: expected exactly one of sweep, run, computed"):
        load_spec(_write(tmp_path, _put(_base(), ("evidence", "computed"), True)))
    raw = {key: value for key, value in _base().items() if key not in ("statistics", "rule")}
    raw["evidence"] = {"not_measured": "no grid varies this yet"}
    spec = load_spec(_write(tmp_path, raw))
    assert spec.not_measured == "no grid varies this yet" and spec.statistics == {} and spec.supported_if is None
    result = evaluate_claim(spec, tmp_path)
    assert result.verdict == NOT_MEASURED and result.reason == "no grid varies this yet"


def test_a_teacher_trained_here_names_its_sweep_and_its_overrides_together(tmp_path):
    teacher = {"sweep_name": "heads-synthetic-teacher", "where": {"seed": 0}}
    for given, value in (({"sweep": "heads"}, "'heads'"), ({"overrides": ["seed=0"]}, "None")):
        with pytest.raises(ConfigError) as err:
            load_spec(_write(tmp_path, _put(_base(), ("evidence", "quick", "teacher"), {**teacher, **given})))
        assert str(err.value) == (f"invalid config c08_heads.yaml: evidence.quick.teacher.sweep={value}: expected a sweep "
                                  "file and its overrides together (how to train the teacher), or neither")
    with pytest.raises(ConfigError, match=r"evidence\.quick\.teacher\.overrides=\['seed'\]: expected a list of key=value"):
        load_spec(_write(tmp_path, _put(_base(), ("evidence", "quick", "teacher"),
                                        {**teacher, "sweep": "heads", "overrides": ["seed"]})))
    spec = load_spec(_write(tmp_path, _put(_base(), ("evidence", "quick", "teacher"),
                                           {**teacher, "sweep": "heads", "overrides": ["seed=0", "model.n_heads=8"]})))
    assert spec.teacher("quick") == ("heads-synthetic-teacher", (("seed", 0),))
    assert spec.teacher_training("quick") == ("heads", "heads-synthetic-teacher", ("seed=0", "model.n_heads=8"))
    assert load_spec(_write(tmp_path, _base())).teacher_training("quick") is None  # a job of another claim's sweep
