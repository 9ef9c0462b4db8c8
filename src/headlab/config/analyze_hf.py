"""`headlab-analyze-hf`'s schema: which pretrained model (or checkpoint suite), measured on which texts, and how.

`conf/hf/analyze.yaml` selects a file of `conf/hf/model/` and `conf/hf/data/` over this schema; the
defaults are written here once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

CONFIG_MODULE = "headlab.conf.hf"  # its own config folder: `model=` and `data=` are its groups


@dataclass
class ModelSection:
    name: Optional[str] = "minilm"
    path: Optional[str] = None  # a local folder (config.json + weights + tokenizer): any family of headlab.hf.families
    hub: Optional[str] = None  # or a hub id (with download=true, or already in the HF cache)
    revision: Optional[str] = None  # the hub revision (a branch, tag or commit; Pythia: step1000)
    trust_remote_code: bool = False  # refused when true: headlab never runs a model's own code


@dataclass
class SyntheticSection:
    n: int = 2000
    seed: int = 0


@dataclass
class FilesSection:
    """Your own file, under the key headlab-train reads it from (`data.files.train`)."""

    train: Optional[str] = None


@dataclass
class DataSection:
    """One file of conf/hf/data/ names the source; the other keys are shared defaults."""

    source: str = "zh_reviews"
    files: FilesSection = field(default_factory=FilesSection)
    probe_size: int = 256
    max_len: int = 128
    seed: int = 0  # which texts the probe draws
    max_unk_rate: float = 0.5  # refuse data whose probe tokens are mostly [UNK]
    synthetic: SyntheticSection = field(default_factory=SyntheticSection)


@dataclass
class MeasureSection:
    chunk_size: int = 32  # probe sequences per forward
    map_len: int = 32  # positions kept in each head's mean attention map
    weight_metrics: bool = True  # per-head W_Q pair tables (q_cosine, qk_cosine, q_subspace)


@dataclass
class LMSection:
    """The standard induction test a decoder is also measured on: BOS, L random tokens, the same L."""

    probe_size: int = 64  # sequences
    half_len: int = 32  # L
    seed: int = 0


@dataclass
class ClassifierSection:
    """The linear head `importance=true` fits (headlab.hf.importance.ImportanceFit)."""

    test_share: float = 0.5  # share of each class held out for scoring
    seed: int = 0  # split, head fit and random control
    steps: int = 200  # full-batch Adam steps on the frozen features
    lr: float = 0.1
    batch_size: int = 32  # texts per forward (max length: data.max_len)


@dataclass
class AnalyzeHFConfig:
    """`headlab-analyze-hf [model=minilm] [data=zh_reviews|...] [importance=true] [key=value ...]`."""

    model: ModelSection = field(default_factory=ModelSection)
    data: DataSection = field(default_factory=DataSection)
    measure: MeasureSection = field(default_factory=MeasureSection)
    lm: LMSection = field(default_factory=LMSection)
    # a checkpoint suite instead of one model: a conf/suite/ name (pythia-70m, polypythia-70m, multiberts),
    # a suite YAML or a folder holding suite.yaml; writes a sweep-shaped folder, one job per seed (headlab.hf.suite)
    suite: Optional[str] = None
    download: bool = False  # fetch hub checkpoints not yet in the HF cache (a machine with network)
    cache_dir: Optional[str] = None  # the HF cache to read / fill (null: huggingface_hub's default, HF_HOME)
    figures: bool = True  # a suite's per-job figures (seconds each; the tables are the measurement)
    # importance=true: a linear head on the frozen mean-pooled encoder, fitted on a stratified train part,
    # then every head scored on the held-out part (ablation, gradient importance): a labelled source only
    importance: bool = False
    classifier: ClassifierSection = field(default_factory=ClassifierSection)
    threads: Optional[int] = None  # torch intra-op threads (null: torch's default)
    # null: ${HEADLAB_LOG_DIR:-logs}/runs/analyze_hf/<date_time_microseconds>; a suite: .../suites/<name> (a rerun resumes)
    run_dir: Optional[str] = None


SCHEMA = AnalyzeHFConfig  # stored as analyze_hf_schema (headlab.config.schemas)
