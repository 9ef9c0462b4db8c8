"""The schemas of `headlab-train`'s config groups, as dataclasses in Hydra's ConfigStore.

conf/'s group files name their schema first in their defaults list (`- /schema/model@_here_`), so
OmegaConf types every key while Hydra composes: a wrong type or an unknown key fails there, before
headlab runs, and `headlab.config.messages` turns that into one line. The values stay in the YAML
files (a field without a default is MISSING here); the model's come from `ModelConfig` itself.

The top level and `data` stay open, because other files add keys to them (headlab-distill adds
`teacher` and `distill`, sweep=data_size `data.train_fraction`); `data`'s declared keys are still
typed at composition. Keys added to any schema's node (open, or with `+key=`) must be one of its
`*Options` (ADDED_KEYS), and the top level's own keys are `TrainKeys`: `headlab.config.validate`
checks both. Nodes whose `_target_` has no schema (Lightning's Trainer, loggers and callbacks,
torch's optimisers, and `module`, whose target headlab-distill swaps) are checked against the
target's signature (`headlab.config.signature`).

Choices (`model.pos_encoding`, `optim.schedule`, ...) stay strings here, checked against the lists
their owners name (POS_ENCODINGS, SCHEDULES, ...) when validation builds them: an Enum field would
put Enum members, not strings, into the composed config, the checkpoints' hyper-parameters and
`config_digest`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, List, Literal, Optional, Union

from omegaconf import MISSING, OmegaConf

from headlab.model.config import ModelConfig

# ModelConfig fields the data supplies at build time (train() passes them), so no config key.
_MODEL_FIELDS_FROM_DATA = ("vocab_size", "n_classes", "pad_id", "n_domains")


def _schema_type(hint: Any) -> Any:
    """`int | None` -> Optional[int]; a union OmegaConf cannot type (str | list) -> Any, left to
    ModelConfig's own check."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and args[0] in (int, float, str, bool):
            return Optional[args[0]]
        return Any
    return hint if hint in (int, float, str, bool) else Any


def _model_schema() -> type:
    """`model:` = ModelConfig's fields and defaults, less those the data supplies, plus `_target_`."""
    hints = typing.get_type_hints(ModelConfig)
    fields = [("_target_", str, field(default="headlab.model.ModelConfig"))]
    for spec in dataclasses.fields(ModelConfig):
        if spec.name in _MODEL_FIELDS_FROM_DATA:
            continue
        default = MISSING if spec.default is dataclasses.MISSING else spec.default
        fields.append((spec.name, _schema_type(hints[spec.name]), field(default=default)))
    return dataclasses.make_dataclass("ModelSchema", fields, namespace={"__module__": __name__})


ModelSchema = _model_schema()


def _lm_schema() -> type:
    """`model:` of model=lm = LMConfig's fields and defaults, less the data's vocab_size, plus `_target_`."""
    from headlab.model.lm import LMConfig

    hints = typing.get_type_hints(LMConfig)
    fields = [("_target_", str, field(default="headlab.model.lm.LMConfig"))]
    for spec in dataclasses.fields(LMConfig):
        if spec.name != "vocab_size":
            default = MISSING if spec.default is dataclasses.MISSING else spec.default
            fields.append((spec.name, _schema_type(hints[spec.name]), field(default=default)))
    return dataclasses.make_dataclass("LMSchema", fields, namespace={"__module__": __name__})


LMSchema = _lm_schema()


# ---- data ------------------------------------------------------------------------------------------
@dataclass
class TextDataSchema:
    """`data:` keys every source shares (headlab.data.TextDataModule's arguments)."""

    _target_: str = "headlab.data.TextDataModule"
    source: str = MISSING
    max_len: int = MISSING
    batch_size: int = MISSING
    val_fraction: float = MISSING
    test_fraction: float = MISSING
    seed: int = MISSING
    probe_size: int = MISSING
    num_workers: int = MISSING
    min_freq: int = MISSING
    bucket_by_length: bool = MISSING


# ---- options: keys no shipped file sets for everyone but a sweep, headlab-distill or a user adds
# (`+data.train_fraction=0.2`). Never instantiated (no defaults): only their types are read, by
# headlab.config.validate, which refuses any other added key.
@dataclass
class RepeatTokensDataSchema:
    """`data:` of data=repeat_tokens (headlab.data.lm_datamodule.RepeatTokensDataModule's arguments)."""

    _target_: str = "headlab.data.lm_datamodule.RepeatTokensDataModule"
    vocab_size: int = MISSING
    max_len: int = MISSING
    min_segment: int = MISSING
    max_segment: int = MISSING
    fixed_offset: Optional[int] = MISSING
    batch_size: int = MISSING
    n_train: int = MISSING
    n_eval: int = MISSING
    probe_size: int = MISSING
    probe_half_len: int = MISSING
    probe_max_gap: int = MISSING
    seed: int = MISSING
    num_workers: int = MISSING


@dataclass
class ReviewsLMDataSchema:
    """`data:` of data=zh_reviews_lm (headlab.data.lm_datamodule.ReviewsLMDataModule's arguments)."""

    _target_: str = "headlab.data.lm_datamodule.ReviewsLMDataModule"
    max_len: int = MISSING
    batch_size: int = MISSING
    min_freq: int = MISSING
    val_fraction: float = MISSING
    test_fraction: float = MISSING
    probe_size: int = MISSING
    probe_half_len: int = MISSING
    probe_max_gap: int = MISSING
    probe_vocab: Optional[int] = MISSING
    seed: int = MISSING
    num_workers: int = MISSING


@dataclass
class DataOptions:
    eval_batch_size: Optional[int]
    shuffle_seed: Optional[int]
    train_fraction: float
    train_labels: Optional[int]
    train_unlabelled: bool


@dataclass
class SyntheticOptions:
    """headlab.data.synthetic.generate_synthetic's other arguments."""

    seed: int
    min_len: int
    max_len: int
    marker: str
    n_markers: int
    letters: str
    end_letters: str


@dataclass
class MultidomainOptions:
    """headlab.data.multidomain.generate_multidomain's other arguments."""

    seed: int
    min_len: int
    max_len: int


@dataclass
class HeadMetricsOptions:
    min_gap_steps: int
    importance: bool


@dataclass
class RunCheckpointOptions:
    keep_every_n_train_steps: Optional[int]  # also keep checkpoints/step{step:06d}.ckpt every N steps


@dataclass
class SyntheticSettings:
    n: int = MISSING  # texts (headlab.data.synthetic.generate_synthetic)


@dataclass
class MultidomainSettings:
    n: int = MISSING  # texts per domain (headlab.data.multidomain.generate_multidomain)
    domains: List[str] = MISSING
    mark_domain: bool = MISSING


@dataclass
class FilesSettings:
    train: str = MISSING
    val: Optional[str] = None
    test: Optional[str] = None


@dataclass
class SyntheticDataSchema(TextDataSchema):
    synthetic: SyntheticSettings = field(default_factory=SyntheticSettings)


@dataclass
class MultidomainDataSchema(TextDataSchema):
    multidomain: MultidomainSettings = field(default_factory=MultidomainSettings)


@dataclass
class FilesDataSchema(TextDataSchema):
    files: FilesSettings = field(default_factory=FilesSettings)


@dataclass
class FilesLMDataSchema(ReviewsLMDataSchema):
    """`data:` of data=files_lm (headlab.data.lm_datamodule.FilesLMDataModule's arguments)."""

    _target_: str = "headlab.data.lm_datamodule.FilesLMDataModule"
    files: FilesSettings = field(default_factory=FilesSettings)


# ---- optim -----------------------------------------------------------------------------------------
@dataclass
class WarmupScheduleSchema:
    """`optim.scheduler:` headlab.lit.schedule.WarmupSchedule, reading the optim group's flat knobs."""

    _target_: str = "headlab.lit.schedule.WarmupSchedule"
    schedule: str = MISSING
    warmup_steps: Optional[int] = MISSING
    warmup_ratio: float = MISSING
    min_lr_ratio: float = MISSING


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
@dataclass
class HeadMetricsSchema:
    """`callbacks.head_metrics:` headlab.lit.callbacks.HeadMetricsCallback."""

    _target_: str = "headlab.lit.callbacks.HeadMetricsCallback"
    output_dir: Optional[str] = MISSING
    every_n_steps: int = MISSING
    early_steps: int = MISSING
    early_spacing: str = MISSING
    measure_epoch_end: bool = MISSING
    chunk_size: int = MISSING
    map_len: int = MISSING
    log_to_loggers: bool = MISSING
    figures: bool = MISSING
    query_tokens: Optional[List[str]] = MISSING
    probe_patterns: int = MISSING  # probe sentences whose per-head maps are stored (0: no token view)
    probe_pattern_len: int = MISSING
    view: bool = MISSING  # view.html at the end of the run


@dataclass
class RunCheckpointSchema:
    """`callbacks.checkpoint:` headlab.lit.checkpointing.RunCheckpoint."""

    _target_: str = "headlab.lit.checkpointing.RunCheckpoint"
    dirpath: Optional[str] = MISSING
    every_n_train_steps: Optional[int] = MISSING
    handle_signals: bool = MISSING


@dataclass
class HeadInterventionSchema:
    """`callbacks.intervention:` headlab.lit.callbacks.interventions.HeadIntervention."""

    _target_: str = "headlab.lit.callbacks.interventions.HeadIntervention"
    kind: str = MISSING
    step: Optional[int] = MISSING
    heads: Any = MISSING  # [[layer, head], ...] or auto: HeadIntervention checks which
    n_layers: int = MISSING
    n_heads: int = MISSING
    output_dir: Optional[str] = MISSING
    auto_batches: int = MISSING


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
    sweep_name: Optional[str] = None
    threads: Any = field(default=None, metadata={"type": Union[int, Literal["auto"], None]})
    tags: List[str] = field(default_factory=list)
    resume_allow: List[str] = field(default_factory=list)
    overwrite: bool = False  # a fresh start in a run dir that holds a run replaces it (else refused)


# Each schema (and its subclasses) -> the dataclass typing the keys that may be added to it.
ADDED_KEYS: tuple[tuple[type, type], ...] = (
    (TextDataSchema, DataOptions),
    (SyntheticSettings, SyntheticOptions),
    (MultidomainSettings, MultidomainOptions),
    (HeadMetricsSchema, HeadMetricsOptions),
    (RunCheckpointSchema, RunCheckpointOptions),
)

# (ConfigStore name under schema/, the schema, open to keys other files add)
SCHEMAS: tuple[tuple[str, Any, bool], ...] = (
    ("model", ModelSchema, False),
    ("data/zh_reviews", TextDataSchema, True),
    ("data/synthetic", SyntheticDataSchema, True),
    ("data/multidomain", MultidomainDataSchema, True),
    ("data/files", FilesDataSchema, True),
    ("model_lm", LMSchema, False),
    ("data/repeat_tokens", RepeatTokensDataSchema, False),
    ("data/zh_reviews_lm", ReviewsLMDataSchema, False),
    ("data/files_lm", FilesLMDataSchema, False),
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
