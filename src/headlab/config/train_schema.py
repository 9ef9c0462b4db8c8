"""The schemas of `headlab-train`'s config groups, as dataclasses in Hydra's ConfigStore.

conf/'s group files name their schema first in their defaults list (`- /schema/model@_here_`), so
OmegaConf types every key while Hydra composes: a wrong type or an unknown key fails there, before
headlab runs, and `headlab.config.messages` turns that into one line.

Each schema is DERIVED (`schema_of`) from the class it configures: its keys are the ones its conf file
sets (in that order, so a composed config reads as the file does), typed by the class's signature; the
values stay in the YAML files (MISSING here), except the model's, whose defaults are `ModelConfig`'s
own. The signature's other parameters are the keys a user or a sweep may add (`+data.train_fraction=0.2`),
less those the code supplies itself (SUPPLIED). A parameter renamed in code is a schema changed with it.

The top level and the `data` nodes stay open, because other files add keys to them
(headlab-distill adds `teacher` and `distill`, sweep=data_size `data.train_fraction`). After composition
every `_target_` node, with a schema here or not (Lightning's Trainer, loggers and callbacks, torch's
optimisers, `module`, whose target headlab-distill swaps), is checked against the same signature
(`headlab.config.signature`): the keys added to it, and the unions OmegaConf cannot type.

Choices (`model.pos_encoding`, `optim.schedule`, ...) stay strings here, checked against the lists
their owners name (POS_ENCODINGS, SCHEDULES, ...) when validation builds them: an Enum field would
put Enum members, not strings, into the composed config, the checkpoints' hyper-parameters and
`config_digest`.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import os
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any, List, Literal, Optional, Union

from omegaconf import MISSING, OmegaConf

_PLAIN = (int, float, str, bool)


def _schema_type(hint: Any) -> Any:
    """A signature's hint as OmegaConf can type it: `int | None` -> Optional[int], `Sequence[str]` ->
    List[str], a path -> str; a union of different kinds (str | list) -> Any, left to the class's check."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        args = typing.get_args(hint)
        kinds = {_schema_type(a) for a in args if a is not type(None)}
        if len(kinds) != 1 or Any in kinds:
            return Any
        kind = kinds.pop()
        return Optional[kind] if type(None) in args else kind
    if hint in _PLAIN:
        return hint
    if inspect.isclass(hint) and issubclass(hint, os.PathLike):
        return str
    origin, args = typing.get_origin(hint) or hint, typing.get_args(hint)
    if origin in (list, tuple, Sequence) and args and args[0] in _PLAIN and (origin is not tuple or args[-1] is Ellipsis):
        return List[args[0]]
    return Any


# Names the signatures' annotations use (they are strings: `from __future__ import annotations`).
_NAMES = {**vars(typing), "Sequence": Sequence, "Mapping": Mapping, "os": os}
_HEADLAB = Path(__file__).resolve().parents[1]  # src/headlab


@functools.lru_cache(maxsize=None)  # a source file is parsed once per process (every validation reads it)
def parameters(dotted: str) -> dict[str, tuple[Any, Any]]:
    """The keyword parameters of the class or function `dotted` names, as name -> (type hint, default or
    MISSING): a class's `__init__` (`**kwargs` followed to its first base) or a dataclass's fields.

    Read from the source, not imported: registering the schemas must not import Lightning or matplotlib
    into every command, and config/ sits below the packages it types (tests/test_layering.py)."""
    module, _, name = dotted.rpartition(".")
    file = _HEADLAB.joinpath(*module.split(".")[1:])
    tree = ast.parse((file / "__init__.py" if file.is_dir() else file.with_suffix(".py")).read_text(encoding="utf-8"))
    node = next((n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name), None)
    if node is None:  # re-exported by a package: where it comes from
        origin = next(n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
                      and any(a.name == name for a in n.names))
        return parameters(f"{origin}.{name}")
    if isinstance(node, ast.FunctionDef):
        return _arguments(node.args)
    if any("dataclass" in ast.unparse(d) for d in node.decorator_list):  # its annotated fields
        return {n.target.id: (_hint(n.annotation), _default(n.value)) for n in node.body
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    found = _arguments(init.args) if init is not None else {}
    if (init is None or init.args.kwarg is not None) and node.bases:
        found = {**parameters(f"{module}.{ast.unparse(node.bases[0])}"), **found}
    return found


def _arguments(args: ast.arguments) -> dict[str, tuple[Any, Any]]:
    positional = [a for a in args.args if a.arg != "self"]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = [*zip(positional, defaults), *zip(args.kwonlyargs, args.kw_defaults)]
    return {a.arg: (_hint(a.annotation), _default(d)) for a, d in pairs}


def _hint(annotation: ast.expr | None) -> Any:
    try:
        return eval(ast.unparse(annotation), dict(_NAMES)) if annotation is not None else Any  # noqa: S307 - headlab's own source
    except Exception:  # noqa: BLE001 - a name only type checkers import: left to the class's own check
        return Any


def _default(value: ast.expr | None) -> Any:
    try:
        return ast.literal_eval(value) if value is not None else MISSING
    except ValueError:
        return MISSING


def schema_of(target: str, keys: Iterable[str], name: str, *, defaults: bool = False, with_target: bool = True,
              nested: Mapping[str, tuple[str, Iterable[str]]] | None = None) -> type:
    """A dataclass typing `keys` (each a parameter of `target`, a dotted path) by `target`'s signature,
    `_target_` first. `defaults`: the signature's defaults, else MISSING (the YAML's values).
    `nested`: a mapping parameter's own schema, from the function its keys go to."""
    params, nested = parameters(target), nested or {}
    fields: list[tuple[str, Any, Any]] = [("_target_", str, field(default=target))] if with_target else []
    for key in keys:
        if key in nested:
            inner = schema_of(nested[key][0], nested[key][1], f"{name}_{key}", with_target=False)
            fields.append((key, inner, field(default_factory=inner)))
            continue
        if key not in params:
            raise TypeError(f"{target} takes no parameter {key!r}: its conf file and its signature disagree")
        hint, default = params[key]
        fields.append((key, _schema_type(hint), field(default=default if defaults else MISSING)))
    return dataclasses.make_dataclass(name, fields, namespace={"__module__": __name__})


# The functions a classifier source's mapping (`data.synthetic: {n: 6000}`) is passed to.
READERS = {"synthetic": "headlab.data.synthetic.generate_synthetic",
           "multidomain": "headlab.data.multidomain.generate_multidomain", "files": "headlab.data.files.load_file_splits"}


def _conf_dir() -> Path:
    """conf/ (the package headlab.conf), found without importing it: its import registers these schemas."""
    return Path(find_spec("headlab.conf").submodule_search_locations[0])


# conf/'s folders that are no headlab-train group: Hydra's, and those of headlab-analyze-hf and headlab-reproduce.
_NOT_TRAIN_GROUPS = ("hydra", "hf", "reproduce", "suite", "__pycache__")


@functools.lru_cache(maxsize=None)
def config_groups() -> tuple[str, ...]:
    """headlab-train's config groups as a user selects them (`data=...`, `+distill=...`)."""
    return tuple(sorted(p.name for p in _conf_dir().iterdir() if p.is_dir() and p.name not in _NOT_TRAIN_GROUPS))


def help_groups() -> str:
    """`headlab-train --help`'s list: each group with the options conf/ ships (`group: a, b`), one a line."""
    return "\n".join(f"{g}: " + ", ".join(sorted(f.stem for f in (_conf_dir() / g).glob("*.yaml"))) for g in config_groups())


def _from_conf(path: str, name: str, node: str = "") -> type:
    """The schema of conf/<path>'s node at `node`: the keys the file sets there, in its order, typed by
    its `_target_`'s signature (a mapping key of a classifier source by the function READERS names)."""
    cfg = OmegaConf.load(_conf_dir() / path)
    cfg = OmegaConf.select(cfg, node) if node else cfg
    keys = [str(k) for k in cfg if k not in ("defaults", "_target_")]
    nested = {k: (READERS[k], list(cfg[k])) for k in keys if k in READERS}
    return schema_of(cfg._target_, keys, name, nested=nested)


# Parameters the code passes itself (train() the data's sizes, the run its id): never a config key.
SUPPLIED = {"headlab.model.ModelConfig": ("vocab_size", "n_classes", "pad_id", "n_domains"),
            "headlab.model.lm.LMConfig": ("vocab_size", "n_classes", "pad_id", "n_domains"),
            "headlab.lit.callbacks.HeadMetricsCallback": ("run_id",)}


def _model_schemas() -> tuple[type, type]:
    """`model:` = ModelConfig's (LMConfig's) fields and defaults, less those the data supplies."""
    return tuple(schema_of(path, [k for k in parameters(path) if k not in SUPPLIED[path]], name, defaults=True)
                 for path, name in (("headlab.model.ModelConfig", "ModelSchema"), ("headlab.model.lm.LMConfig", "LMSchema")))


ModelSchema, LMSchema = _model_schemas()


# ---- data ------------------------------------------------------------------------------------------
# conf/data/<name>.yaml -> its schema (ZhReviewsDataSchema, ...), from the datamodule it names.
DATA_SCHEMAS = {path.stem: _from_conf(f"data/{path.name}", path.stem.title().replace("_", "") + "DataSchema")
                for path in sorted((_conf_dir() / "data").glob("*.yaml"))}


# ---- optim -----------------------------------------------------------------------------------------
WarmupScheduleSchema = _from_conf("optim/scheduler/warmup.yaml", "WarmupScheduleSchema")


@dataclass
class OptimSchema:
    """The flat knobs every optim option shares; `optimizer` is a torch optimiser (its signature
    types its keys), `scheduler` is optim/scheduler's choice (listed first: its default comes first)."""

    scheduler: Any = MISSING
    lr: float = MISSING
    weight_decay: float = MISSING


@dataclass
class AdamWSchema(OptimSchema):
    betas: List[float] = MISSING
    fused: bool = MISSING
    optimizer: Any = MISSING
    schedule: str = MISSING
    warmup_steps: Optional[int] = MISSING
    warmup_ratio: float = MISSING
    min_lr_ratio: float = MISSING


@dataclass
class SGDSchema(OptimSchema):
    momentum: float = MISSING
    nesterov: bool = MISSING
    optimizer: Any = MISSING
    schedule: str = MISSING
    warmup_steps: Optional[int] = MISSING
    warmup_ratio: float = MISSING
    min_lr_ratio: float = MISSING


# ---- callbacks and interventions -------------------------------------------------------------------
HeadMetricsSchema = _from_conf("callbacks/default.yaml", "HeadMetricsSchema", "head_metrics")
RunCheckpointSchema = _from_conf("callbacks/checkpoints.yaml", "RunCheckpointSchema", "checkpoint")
HeadInterventionSchema = _from_conf("intervention/knockout.yaml", "HeadInterventionSchema", "callbacks.intervention")


@dataclass
class InterventionSettings:
    """`intervention.knockout:` / `intervention.freeze_pattern:` the knobs the callback reads."""

    step: Optional[int] = MISSING
    heads: Any = MISSING
    auto_batches: int = MISSING


@dataclass
class PathsSchema:
    log_dir: str = MISSING
    output_dir: str = MISSING


# ---- the top level ---------------------------------------------------------------------------------
@dataclass
class TrainKeys:
    """train.yaml's own keys. `resume` (true, false or auto) and `threads` (an int, auto or null)
    are unions OmegaConf cannot type: `headlab.config.validate` checks them."""

    seed: int = 42
    resume: Any = field(default=False, metadata={"type": Union[bool, Literal["auto"]]})
    test: bool = True
    figures: bool = True  # the per-run figures at fit end (each measuring callback's `figures` reads it)
    sweep_name: Optional[str] = None
    threads: Any = field(default=None, metadata={"type": Union[int, Literal["auto"], None]})
    tags: List[str] = field(default_factory=list)
    resume_allow: List[str] = field(default_factory=list)
    overwrite: bool = False  # a fresh start in a run dir that holds a run replaces it (else refused)


def top_level_keys(present: Iterable[str]) -> list[str]:
    """The keys headlab-train's top level may hold, those `present` first in their order: train.yaml's own
    (TrainKeys), the module, each config group's node (also one not selected: `debugg=` names `debug`), and
    the teacher run headlab-distill's group (conf/distill/) adds."""
    allowed = ["module", *(f.name for f in dataclasses.fields(TrainKeys)), "teacher", *config_groups()]
    return list(dict.fromkeys([*(k for k in present if k in allowed), *allowed]))


# (ConfigStore name under schema/, the schema, open to keys other files add)
SCHEMAS: tuple[tuple[str, Any, bool], ...] = (
    ("model", ModelSchema, False),
    # open to the keys sweeps and headlab-distill add (sweep=data_size: data.train_fraction); checked by the signature
    *((f"data/{name}", schema, True) for name, schema in DATA_SCHEMAS.items()),
    ("model_lm", LMSchema, False),
    ("optim/adamw", AdamWSchema, False),
    ("optim/sgd", SGDSchema, False),
    ("optim/warmup", WarmupScheduleSchema, False),
    ("callbacks/head_metrics", HeadMetricsSchema, False),
    ("callbacks/checkpoint", RunCheckpointSchema, False),
    ("callbacks/intervention", HeadInterventionSchema, False),
    ("intervention", InterventionSettings, False),
    ("paths", PathsSchema, False),
)


def store_train_schemas(store: Any) -> None:
    """Put each schema in `store` (Hydra's ConfigStore) as schema/<name>."""
    for name, schema, open_to_added_keys in SCHEMAS:
        node = OmegaConf.structured(schema)
        if open_to_added_keys:  # the node takes added keys; its own nested nodes stay closed
            OmegaConf.set_struct(node, False)
            for key in node:
                child = node._get_node(key)  # noqa: SLF001 - the node itself, its MISSING values unread
                if OmegaConf.is_dict(child):
                    OmegaConf.set_struct(child, True)
        group, _, leaf = f"schema/{name}".rpartition("/")
        store.store(group=group, name=leaf, node=node)
