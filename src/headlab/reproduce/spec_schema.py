"""The schema of a claim spec (conf/reproduce/cNN_*.yaml) as Hydra structured configs: the file format
of headlab-reproduce, so it lives with the code that reads it.

Each key a spec may hold is a typed field here, with its default written once, so a spec file is
checked by OmegaConf (types, choices, unknown keys, missing values) before headlab reads it; the
checks that relate several keys (which evidence kind needs which scale keys, a rule naming the
spec's statistics) stay with the reader, `headlab.reproduce.spec`.

A spec file is merged into `OmegaConf.structured(ClaimSpecConfig)` rather than selecting the schema
through a defaults list: the specs are data files read from a folder (the shipped one, or an
edited copy in a test), not configs composed by Hydra, and a `defaults:` line in each of them
would be boilerplate a copy can lose. `register_claim_specs()` still puts the schema in Hydra's
ConfigStore (group `reproduce/schema`) for configs that compose a spec.

Issue 25's keys: `primary` (the one statistic the verdict reads; the others are secondary),
`margin` (the smallest effect the article's words allow, with the words it comes from),
`prerequisite` (what must have formed for the claim to be testable at all) and `seeds` (the
exploratory seeds seen before the rules were written, and the confirmatory ones that decide).
"""

from __future__ import annotations

import difflib
import re
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Dict, List, Optional

from omegaconf import MISSING, OmegaConf
from omegaconf.errors import InterpolationResolutionError, OmegaConfBaseException

from headlab.errors import ConfigError

SCHEMA_GROUP = "reproduce/schema"
SCHEMA_NAME = "claim_spec"


class StatisticKind(Enum):
    """How a statistic is computed (`headlab.reproduce.statistics`)."""

    mean = "mean"                            # per-run values (or rows) selected by `where`
    paired_difference = "paired_difference"  # per seed: config `a` minus config `b`
    group_difference = "group_difference"    # rows `a` minus rows `b`, Welch's interval
    computed = "computed"                    # a measurement per seed, no table (evidence `computed: true`)


class Reduction(Enum):
    """How a per-head / per-layer table's rows of one run become that run's value."""

    mean = "mean"
    median = "median"
    nan_fraction = "nan_fraction"              # share of rows whose value is missing (never settled)
    fraction_in = "fraction_in"                # share of rows whose `column` is in `values`
    distinct_per_layer = "distinct_per_layer"  # distinct values of `column` per layer, averaged
    last_step_mean = "last_step_mean"          # mean of `column` over the run's last `step`
    last_step_max = "last_step_max"            # largest `column` at the run's last `step` (its top head)
    first_step_max = "first_step_max"          # largest `column` at the run's first `step` (the top head at init)
    fraction_at_most = "fraction_at_most"      # share of rows whose `column` is <= `at_most` (missing: not)
    settle_median = "settle_median"            # median step, a missing one (never settled) read as the run's `final_step`


class Measurement(Enum):
    """What a `computed` statistic measures (`headlab.reproduce.directions.MEASUREMENTS`)."""

    random_vectors = "random_vectors"
    initialised_queries = "initialised_queries"


class MeasurementField(Enum):
    """The value of a measurement a `computed` statistic averages."""

    cos_std = "cos_std"
    in_band = "in_band"


class Direction(Enum):
    """The side of the margin the article claims the primary statistic lies on."""

    greater = "greater"  # the effect is at least the margin (a gain, a share, a speed-up)
    less = "less"        # the effect is at most the margin (a cost, a step count that is smaller)


class SweepProgram(Enum):
    """The command a sweep's multirun starts (`headlab-train` or `headlab-distill`)."""

    train = "train"
    distill = "distill"


class RunCommand(Enum):
    """The command whose run directory a `run` evidence reads."""

    analyze_hf = "analyze_hf"


def _allowed_text(text: str) -> dict[str, str]:
    """A field's metadata saying what is allowed when the type alone says too little (errors quote it)."""
    return {"allowed": text}


@dataclass
class ArticleConfig:
    """The claim in the article's words (verbatim) and an English gloss."""

    zh: str = MISSING
    en: str = MISSING


@dataclass
class TeacherConfig:
    """One job of another sweep of the same scale, passed to this sweep as `teacher=<its run dir>`."""

    sweep_name: str = MISSING
    where: Dict[str, Any] = MISSING  # config key -> value, naming exactly one job
    # how to train it when no claim's sweep of the scale holds it: conf/sweep/<sweep>.yaml with these
    # overrides, one job (a teacher that outlives the claim whose sweep first trained it)
    sweep: Optional[str] = None
    overrides: List[str] = field(default_factory=list, metadata=_allowed_text("a list of key=value overrides"))


@dataclass
class ScaleConfig:
    """The evidence at one scale (`quick`: CPU, `full`: the article's). A sweep's scale names
    `sweep_name` and `overrides` (and maybe a `teacher`); a run's names `run_name` and `command`."""

    sweep_name: Optional[str] = None         # the sweep's folder under the sweeps root
    # the multirun's key=value overrides
    overrides: List[str] = field(default_factory=list, metadata=_allowed_text("a list of key=value overrides"))
    teacher: Optional[TeacherConfig] = None
    run_name: Optional[str] = None           # the run's folder under <log dir>/runs/reproduce/
    # the run command's key=value settings
    command: List[str] = field(default_factory=list,
                               metadata=_allowed_text("a list of key=value settings of the command"))


@dataclass
class PerJobConfig:
    """A command the runner applies to each completed job of the sweep before aggregating."""

    # headlab-prune or headlab-importance: text, not an Enum (OmegaConf matches Enum members by name,
    # and these names have hyphens); headlab.reproduce.spec.PER_JOB_COMMANDS checks it
    command: str = MISSING
    # the command's key=value settings
    args: List[str] = field(default_factory=list, metadata=_allowed_text("a list of key=value settings of the command"))
    where: Optional[Dict[str, Any]] = None   # the jobs it runs on (config key -> value); none: all
    quick_where: Optional[Dict[str, Any]] = None  # the selection at one scale, when they differ
    cpu_where: Optional[Dict[str, Any]] = None
    full_where: Optional[Dict[str, Any]] = None
    replication_where: Optional[Dict[str, Any]] = None


@dataclass
class SuitesConfig:
    """The evidence at the suites scale (`make reproduce SCALE=suites`): a public checkpoint suite
    (seeds x steps, models trained by others) measured by `headlab-analyze-hf suite=...` into a
    sweep-shaped folder, `<sweeps root>/<sweep_name>/reproduce`, then `headlab-aggregate`. The
    spec's statistics read its tables as they read a training sweep's; evidence is not part of the
    frozen rule (`headlab.reproduce.spec_history.RULE_KEYS`), so adding this block changes no rule."""

    suite: str = MISSING                     # a conf/suite/ name (or a suite YAML / a folder holding suite.yaml)
    sweep_name: str = MISSING                # the suite's folder under the sweeps root
    # headlab-analyze-hf's key=value settings (data=, threads=, download=, ...)
    command: List[str] = field(default_factory=list,
                               metadata=_allowed_text("a list of key=value settings of headlab-analyze-hf"))
    table: Optional[str] = None              # the table the statistics read (none: evidence.table)
    step: Optional[int] = None               # per-step tables and checkpoint weights: the step read (none: each seed's last)
    # `where` keys of the statistics that select a training setting (optim, optim.lr): a suite is one
    # training run per seed, with no such column, so these keys are dropped from every selection
    not_swept: List[str] = field(default_factory=list)
    reason: str = MISSING                    # why this suite tests the claim, and what differs from the trained scales


@dataclass
class EvidenceConfig:
    """What the claim's statistics read: exactly one of `sweep`, `run`, `computed`, `not_measured`."""

    sweep: Optional[str] = None              # a conf/sweep/ grid, run once per scale
    run: Optional[RunCommand] = None         # one command's run directory
    computed: bool = False                   # statistics of kind `computed`, no training
    not_measured: Optional[str] = None       # why there is no evidence yet, and what would measure it
    program: SweepProgram = SweepProgram.train
    quick: Optional[ScaleConfig] = None
    cpu: Optional[ScaleConfig] = None        # make reproduce-cpu: the confirmatory run on one CPU machine
    full: Optional[ScaleConfig] = None
    # the cpu scale's second look (headlab.reproduce.looks): fresh seeds for a claim its first look
    # leaves undecided, read on their own
    replication: Optional[ScaleConfig] = None
    suites: Optional[SuitesConfig] = None    # make reproduce SCALE=suites: a public checkpoint suite, any evidence kind
    table: Optional[str] = None              # the aggregate (or run) table the statistics read
    figure: Optional[str] = None             # the figure shown beside the verdict
    per_job: List[PerJobConfig] = field(default_factory=list)

    @property
    def kind(self) -> str | None:
        """The one evidence kind this holds ("sweep", "run", "computed", "not_measured"), None when
        it holds none or several."""
        given = [name for name, value in (("sweep", self.sweep), ("run", self.run), ("computed", self.computed or None),
                                          ("not_measured", self.not_measured)) if value is not None]
        return given[0] if len(given) == 1 else None


@dataclass
class StatisticConfig:
    """One named statistic of the claim (a mean with its 95 % interval, `headlab.reproduce.statistics`)."""

    kind: StatisticKind = MISSING
    column: Optional[str] = None             # the table column it reads (table kinds)
    where: Dict[str, Any] = field(default_factory=dict)  # kind mean: the rows (column -> value or list)
    a: Optional[Dict[str, Any]] = None       # difference kinds: the two selections, a minus b
    b: Optional[Dict[str, Any]] = None
    reduce: Optional[Reduction] = None       # per-head tables: one value per run
    values: List[Any] = field(default_factory=list)        # reduce fraction_in: the values counted
    exclude: Dict[str, List[Any]] = field(default_factory=dict)  # rows dropped first: column -> values
    at_most: Optional[float] = None          # reduce fraction_at_most: the bound (e.g. a settle step of 300)
    # `column`'s values grouped into named types before reducing (others dropped), e.g. the article's
    # three pattern types {local: [local, previous_token], distant: [long_range, vertical], uniform: [broad]}
    types: Dict[str, List[Any]] = field(default_factory=dict)
    metric: Optional[str] = None             # long tables: the `metric` whose rows are kept
    bounds: Optional[List[float]] = field(default=None, metadata=_allowed_text(
        "[low, high]: the range the value can take (its interval is clipped to it)"))
    measurement: Optional[Measurement] = None      # kind computed: what is measured
    seeds: List[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])  # kind computed: one value each
    args: Dict[str, Any] = field(default_factory=dict)     # kind computed: the measurement's arguments
    # last: from here on `field` in this class body is this attribute, not dataclasses.field
    field: Optional[MeasurementField] = None       # kind computed: which of its values


@dataclass
class MarginConfig:
    """The smallest effect the article's words allow, on the primary statistic's scale."""

    value: float = MISSING                   # the margin: supported above it, "smaller than claimed" below
    no_effect: float = 0.0                   # no effect (0 for a difference, 1 for a ratio, chance for a share)
    direction: Direction = Direction.greater
    reason: str = MISSING                    # the article's words (or, for a qualitative claim, why this size)


@dataclass
class PrerequisiteConfig:
    """The manipulation check: what must have formed for the claim to be testable at this scale."""

    rule: Optional[str] = None               # a rule over the statistics (null: nothing must form, e.g. no training)
    config: Dict[str, Any] = field(default_factory=dict)  # settings every job must hold (read from its saved config)
    reason: str = MISSING                    # what it checks and why the claim means nothing without it


@dataclass
class SeedsConfig:
    """Which seeds decide: the exploratory ones were seen before these rules were written."""

    exploratory: List[int] = field(default_factory=lambda: [0, 1, 2])
    confirmatory: List[int] = field(default_factory=list)  # run only after the rules were versioned
    replication: List[int] = field(default_factory=list)   # the second look's fresh seeds (evidence.replication)
    rules_frozen: str = ""                   # the date the rules of this version were fixed (YYYY-MM-DD)
    # the one-sided alpha each look spends (look 1, look 2), summing to at most 0.025 and fixed before the
    # next look (headlab.reproduce.looks); empty: a spec without a second look spends all 0.025 at look 1
    alpha: List[float] = field(default_factory=list)


@dataclass
class RuleConfig:
    """The verdict rules, written before running (`headlab.reproduce.rules`)."""

    supported_if: Optional[str] = None
    contradicted_if: Optional[str] = None


@dataclass
class ClaimSpecConfig:
    """One claim spec file: the claim, its evidence, statistics and the rules that decide it."""

    claim: str = field(default=MISSING, metadata=_allowed_text("C followed by a number (C1 ... C18)"))  # the article's id
    version: int = field(default=MISSING, metadata=_allowed_text("an integer >= 1"))  # bumped when evidence or rule change
    title: str = MISSING                     # one line
    section: str = MISSING                   # of the article
    article: ArticleConfig = field(default_factory=ArticleConfig)
    evidence: EvidenceConfig = field(default_factory=EvidenceConfig)
    statistics: Dict[str, StatisticConfig] = field(default_factory=dict)
    rule: RuleConfig = field(default_factory=RuleConfig)  # older specs: explicit rules instead of a margin
    primary: Optional[str] = None            # the statistic the verdict reads (the others are secondary)
    # why the primary is still a proxy and which measurement the direct statistic needs ("" : it is direct);
    # a proxy's verdict is never decisive
    proxy: str = ""
    margin: Optional[MarginConfig] = None
    prerequisite: Optional[PrerequisiteConfig] = None
    seeds: SeedsConfig = field(default_factory=SeedsConfig)
    notes: str = ""                          # caveats of this evidence


def register_claim_specs() -> None:
    """Store the schema as `reproduce/schema/claim_spec` in Hydra's ConfigStore, so a config Hydra
    composes can select it in a defaults list; calling it again stores the same node again."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(group=SCHEMA_GROUP, name=SCHEMA_NAME, node=ClaimSpecConfig)


def load_claim_spec_config(path: str | Path) -> ClaimSpecConfig:
    """The spec file at `path` as a checked ClaimSpecConfig; a ConfigError naming the file, the key
    path, the value and what is allowed for a file that does not fit the schema."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        given = OmegaConf.create(text)
    except Exception as err:  # noqa: BLE001 - OmegaConf raises the YAML parser's own errors
        raise ConfigError(path.name, "<file>", f"valid YAML ({' '.join(str(err).split())})") from err
    if not OmegaConf.is_dict(given):
        raise ConfigError(path.name, OmegaConf.to_container(given),
                          "a mapping of claim, version, title, section, article, evidence, ...")
    raw = OmegaConf.to_container(given)
    _check_shape(path.name, raw, ClaimSpecConfig, [])
    try:
        merged = OmegaConf.merge(OmegaConf.structured(ClaimSpecConfig), given)
        missing = next(_missing(merged, []), None)
        if missing is not None:
            raise ConfigError(f"{path.name}: {_key_text(missing)}", None, "a value (required)")
        return OmegaConf.to_object(merged)
    except InterpolationResolutionError as err:
        raise ConfigError(f"{path.name}: {err.full_key}", _given(raw, _parts(str(err.full_key))),
                          "text without ${...} (OmegaConf would read it as an interpolation)") from None
    except OmegaConfBaseException as err:
        parts = _list_owner(_parts(str(err.full_key)))
        if not parts:  # OmegaConf could not tell where: say what it said
            raise ConfigError(path.name, None, f"values that fit the schema ({str(err.msg).splitlines()[0]})") from None
        raise ConfigError(f"{path.name}: {_key_text(parts)}", _given(raw, parts), _allowed(parts)) from None


def _check_shape(file: str, raw: Any, tp: Any, parts: list[str | int]) -> None:
    """Refuse unknown keys, anything but a mapping where a config or mapping belongs and a mapping
    where a list belongs, naming the full key path; merge each config of a list on its own.
    OmegaConf's errors lose the path in these cases, so they are found before it merges."""
    tp = _unwrap(tp)
    origin = typing.get_origin(tp)
    if raw is None:
        return
    if (is_dataclass(tp) or origin is dict) and not isinstance(raw, dict) or origin is list and isinstance(raw, dict):
        raise ConfigError(f"{file}: {_key_text(parts)}", raw, _allowed(parts))
    if is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        for key, value in raw.items():
            if key not in hints:
                raise _unknown_key(file, [*parts, key], raw[key])
            _check_shape(file, value, hints[key], [*parts, key])
    elif origin is list and isinstance(raw, list):
        element = _unwrap(typing.get_args(tp)[0])
        for i, value in enumerate(raw):
            _check_shape(file, value, element, [*parts, i])
            if is_dataclass(element):
                try:
                    OmegaConf.merge(OmegaConf.structured(element), value)
                except OmegaConfBaseException as err:
                    inner = _list_owner(_parts(str(err.full_key)))
                    raise ConfigError(f"{file}: {_key_text([*parts, i, *inner])}", _given(value, inner),
                                      _allowed(inner, element)) from None
    elif origin is dict:
        for key, value in raw.items():
            _check_shape(file, value, typing.get_args(tp)[1], [*parts, key])


def _missing(cfg: Any, parts: list[str | int]):
    """Key paths of the required values not given, in the schema's order (claim before article.zh)."""
    for key in (cfg.keys() if OmegaConf.is_dict(cfg) else range(len(cfg))):
        if OmegaConf.is_missing(cfg, key):
            yield [*parts, key]
        elif OmegaConf.is_config(child := cfg[key]):
            yield from _missing(child, [*parts, key])


def _unknown_key(file: str, parts: list[str | int], given: Any) -> ConfigError:
    owner = _schema_type(parts[:-1])
    allowed = [f.name for f in fields(owner)] if is_dataclass(owner) else []
    close = difflib.get_close_matches(str(parts[-1]), allowed, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return ConfigError(f"{file}: {_key_text(parts)}", given, f"a known key: {hint}(allowed: {', '.join(allowed)})")


def _list_owner(parts: list[str | int]) -> list[str | int]:
    """The key of the list an element belongs to (a bad element: name the list, show all of it)."""
    while parts and isinstance(parts[-1], int):
        parts = parts[:-1]
    return parts


def _parts(full_key: str) -> list[str | int]:
    """`statistics.gap.bounds[0]` -> ["statistics", "gap", "bounds", 0]."""
    return [int(index) if index else name for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", full_key)]


def _key_text(parts: list[str | int]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p) for i, p in enumerate(parts))


def _given(raw: Any, parts: list[str | int]) -> Any:
    """The value the file gives at `parts` (None when it gives none)."""
    for part in parts:
        try:
            raw = raw[part]
        except (KeyError, IndexError, TypeError):
            return None
    return raw


def _schema_type(parts: list[str | int], root: Any = ClaimSpecConfig) -> Any:
    """The type the schema gives the value at `parts` below `root` (Any where it cannot tell)."""
    tp: Any = root
    for part in parts:
        tp = _unwrap(tp)
        if is_dataclass(tp):
            hints = typing.get_type_hints(tp)
            if part not in hints:
                return Any
            tp = hints[part]
        elif typing.get_origin(tp) in (dict, list):
            tp = typing.get_args(tp)[-1]
        else:
            return Any
    return _unwrap(tp)


def _allowed(parts: list[str | int], root: Any = ClaimSpecConfig) -> str:
    """What the value at `parts` may be: its field's `allowed` metadata, else its type in words."""
    owner = _schema_type(parts[:-1], root) if parts else None
    if is_dataclass(owner):
        found = next((f for f in fields(owner) if f.name == parts[-1]), None)
        if found is not None and "allowed" in found.metadata:
            return found.metadata["allowed"]
    return describe(_schema_type(parts, root))


def _unwrap(tp: Any) -> Any:
    """Optional[X] -> X."""
    if typing.get_origin(tp) is typing.Union:
        others = [a for a in typing.get_args(tp) if a is not type(None)]
        return others[0] if len(others) == 1 else tp
    return tp


def describe(tp: Any) -> str:
    """What a value of schema type `tp` must be, in words.

    >>> describe(Optional[List[float]])
    'a list of numbers'
    >>> describe(SweepProgram)
    'one of train, distill'
    """
    tp = _unwrap(tp)
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return f"one of {', '.join(m.name for m in tp)}"
    if is_dataclass(tp):
        return f"a mapping of {', '.join(f.name for f in fields(tp))}"
    if origin is list:
        return f"a list of {_plural(typing.get_args(tp)[0])}"
    if origin is dict:
        value = typing.get_args(tp)[1]
        return "a mapping of key -> value" if value is Any else f"a mapping of name -> {describe(value)}"
    return {bool: "true or false", int: "an integer", float: "a number", str: "text"}.get(tp, "a value")


def _plural(tp: Any) -> str:
    if is_dataclass(tp):
        return f"mappings of {', '.join(f.name for f in fields(tp))}"
    return {int: "integers", float: "numbers", str: "texts"}.get(tp, "values")
