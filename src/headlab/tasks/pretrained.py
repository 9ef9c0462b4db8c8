"""One `headlab-analyze-hf` run: a pretrained encoder or decoder measured on a probe set into a run
directory, or a checkpoint suite (`suite=`) measured into a sweep-shaped folder (`headlab.hf.suite`).

Everything that can fail on the user's input (the source, the model folder, mostly-[UNK] data, the
importance fit) is checked and computed before the run directory is created, so a mistake writes
nothing; then `headlab.hf.analyze` writes the same run contract as a training run.

Its settings are `AnalyzeHFConfig`: `conf/hf/analyze.yaml` (in its own config folder, `CONFIG_MODULE`)
selects a file of `conf/hf/model/` and `conf/hf/data/` over it; the defaults are written here once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from omegaconf import OmegaConf

from headlab.errors import ConfigError
from headlab.store import RunDir, atomic_write_text

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



def analyze_pretrained(cfg: Any) -> dict[str, Any]:
    """Load the model, measure it, write the run contract; returns the summary."""
    from headlab.store.run_info import config_digest, configure_cache_dirs
    from headlab.tasks.threads import set_torch_threads
    from headlab.hf import HFModel, analyze, load_model

    from headlab.tasks.lock import refuse_occupied

    check_common(cfg)
    if cfg.suite:
        return analyze_suite(cfg)
    if cfg.run_dir:  # before any loading: never a write into a folder holding another run (or a file)
        refuse_occupied(Path(cfg.run_dir), "run_dir", "headlab-analyze-hf's tables and figures")
    fit = importance_fit(cfg)
    folder, key, shown = model_folder(cfg)  # before the run dir: a bad path writes nothing
    set_torch_threads(cfg.threads)
    model, tokenizer, family = load_model(folder, key, shown)
    net = HFModel(model, shown, family)
    settings = settings_of(cfg, family.decoder)
    from headlab.hf.analyze import build_probe

    build_probe(tokenizer, settings)  # refuses mostly-[UNK] data before the run dir exists
    importance = importance_facts = None
    if fit is not None:  # computed before the run dir exists: a failure writes nothing
        if family.decoder:
            raise ConfigError("importance", True, f"an encoder (importance fits a classifier on mean-pooled hidden "
                              f"states; {shown} is a {family.name} decoder)")
        from headlab.hf.importance import head_importance, importance_summary
        from headlab.hf.texts import load_labeled

        data = load_labeled(cfg.data.source, cfg.data.files.train, cfg.data.synthetic.n, cfg.data.synthetic.seed)
        importance = head_importance(net, tokenizer, data, fit)
        importance_facts = importance_summary(importance, fit)
    run_dir = Path(cfg.run_dir) if cfg.run_dir else default_run_dir()
    run_dir.mkdir(parents=True, exist_ok=True)
    configure_cache_dirs(run_dir.parent)  # matplotlib caches beside the runs, never in the home directory
    atomic_write_text(RunDir(run_dir).hydra_config_path, OmegaConf.to_yaml(cfg, resolve=True))
    facts = {"run_dir": str(run_dir), "config_digest": config_digest(cfg),
             "model": {**model_facts(net, model, family), "name": cfg.model.name if not (cfg.model.path or cfg.model.hub)
                       else None, "path": str(folder), "hub": cfg.model.hub, "revision": cfg.model.revision}}
    summary = analyze(net, tokenizer, settings, run_dir, facts, importance, importance_facts)
    write_pretrained_view(net, tokenizer, settings, RunDir(run_dir))
    return summary


def check_common(cfg: Any) -> None:
    """What every form refuses before loading anything."""
    from headlab.hf.texts import SOURCES

    if cfg.model.trust_remote_code:
        raise ConfigError("model.trust_remote_code", True, "false: headlab never runs a model's own code (the families "
                          "it reads load from transformers' classes; docs/pretrained.md)")
    if cfg.data.source not in SOURCES:  # before any loading: a typo answers at once
        raise ConfigError("data.source", cfg.data.source, f"one of {list(SOURCES)}")
    if cfg.data.source == "files" and not cfg.data.files.get("train"):
        raise ConfigError("data.files.train", None, "a CSV or JSONL file with a text column (data=files data.files.train=...)")


def model_folder(cfg: Any) -> tuple[Path, str, str]:
    """(folder, config key, how to name it) of model.path, model.hub (cached or downloaded) or model.name."""
    from headlab.hf import resolve_model_path

    if cfg.model.hub and cfg.model.path:
        raise ConfigError("model.hub", cfg.model.hub, "null when model.path is set (one model at a time)")
    if cfg.model.hub:
        from headlab.hf.loading import check_model_folder
        from headlab.hf.suite import Checkpoint, cached_folder

        c = Checkpoint(0, 0, hub=cfg.model.hub, revision=cfg.model.revision)
        folder = cached_folder(c, cfg.cache_dir, cfg.download)
        if folder is None:
            raise ConfigError("model.hub", c.label, "a checkpoint in the local HF cache, or download=true on a machine "
                              f"that reaches the hub (it would fetch config, weights and tokenizer files of {c.label})")
        check_model_folder(folder, "model.hub", c.label)
        return folder, "model.hub", c.label
    folder = resolve_model_path(cfg.model.name, cfg.model.path)
    key = "model.path" if cfg.model.path else "model.name"
    return folder, key, str(cfg.model.path or cfg.model.name)


def settings_of(cfg: Any, decoder: bool) -> Any:
    from headlab.hf import AnalyzeSettings

    return AnalyzeSettings(source=cfg.data.source, path=cfg.data.files.train, probe_size=cfg.data.probe_size,
                           max_len=cfg.data.max_len, seed=cfg.data.seed, max_unk_rate=cfg.data.max_unk_rate,
                           synthetic_n=cfg.data.synthetic.n, synthetic_seed=cfg.data.synthetic.seed,
                           chunk_size=cfg.measure.chunk_size, map_len=cfg.measure.map_len,
                           weight_metrics=cfg.measure.weight_metrics, decoder=decoder,
                           lm_probe_size=cfg.lm.probe_size, lm_half_len=cfg.lm.half_len, lm_seed=cfg.lm.seed)


def model_facts(net: Any, model: Any, family: Any) -> dict[str, Any]:
    return {"family": family.name, "decoder": family.decoder, "architecture": type(model).__name__,
            "n_layers": len(net.blocks), "n_heads": net.n_heads, "d_head": net.blocks[0].attn.d_head,
            "n_params": int(sum(p.numel() for p in model.parameters()))}


def analyze_suite(cfg: Any) -> dict[str, Any]:
    """Every checkpoint of the suite measured into a sweep-shaped folder (one job per seed); resumes."""
    import gc

    import numpy as np

    from headlab.hf import HFModel, load_model
    from headlab.hf.analyze import build_probe, layer_means, measure_checkpoint, role_counts, write_checkpoint
    from headlab.hf.suite import SUITE_MARKER, check_sources, load_suite, measure_suite
    from headlab.store import SweepDir, write_attention_maps
    from headlab.store.run_info import config_digest, configure_cache_dirs, default_log_dir
    from headlab.tasks.threads import set_torch_threads

    if cfg.importance:
        raise ConfigError("importance", True, "false with suite= (importance scores one model: run it per checkpoint)")
    if cfg.model.path or cfg.model.hub:
        raise ConfigError("suite", cfg.suite, "no model.path / model.hub beside it (the suite names its checkpoints)")
    suite = load_suite(cfg.suite)
    out = Path(cfg.run_dir) if cfg.run_dir else default_log_dir() / "suites" / suite.name
    refuse_foreign(out, suite.name, SUITE_MARKER)
    check_sources(suite, cfg.cache_dir, cfg.download)  # nothing written yet: a missing checkpoint says so here
    set_torch_threads(cfg.threads)
    first = suite.checkpoints[0]
    from headlab.hf.suite import cached_folder

    folder = Path(first.path) if first.path else cached_folder(first, cfg.cache_dir, cfg.download)
    model, tokenizer, family = load_model(folder, "suite", first.label)
    settings = settings_of(cfg, family.decoder)
    build_probe(tokenizer, settings)  # mostly-[UNK] data refused before the folder exists
    del model, tokenizer
    gc.collect()
    configure_cache_dirs(out.parent)
    facts = {"config_digest": config_digest(cfg), "data": {"source": settings.source, "probe_size": settings.probe_size,
                                                            "max_len": settings.max_len, "seed": settings.seed}}

    def measure(folder: Path, step: int, job_dir: Path) -> dict[str, Any]:
        model, tokenizer, family = load_model(folder, "suite", str(folder))
        net = HFModel(model, str(folder), family)
        cm = measure_checkpoint(net, tokenizer, settings_of(cfg, family.decoder), step)
        write_checkpoint(job_dir, step, cm)
        run = RunDir(job_dir)
        first_maps = None
        if run.attention_maps_path.is_file():
            with np.load(run.attention_maps_path, allow_pickle=False) as stored:
                if int(stored["step"]) > step:  # a later step already holds `last`: keep it
                    return checkpoint_row(net, model, family, cm, layer_means, role_counts)
                first_maps = _Maps(stored["mean_pattern_first" if "mean_pattern_first" in stored else "mean_pattern"],
                                   int(stored["step_first" if "step_first" in stored else "step"]))
        write_attention_maps(run.attention_maps_path, cm.m, first_maps if first_maps and first_maps.step < step else None)
        return checkpoint_row(net, model, family, cm, layer_means, role_counts)

    result = measure_suite(suite, out, measure, facts, OmegaConf.to_yaml(cfg, resolve=True), cfg.cache_dir, cfg.download)
    if cfg.figures:
        from headlab.plots.run_figures import write_run_figures  # matplotlib once the tables exist

        for job in SweepDir(out).job_paths():
            write_run_figures(job)
    return {**result, "suite": suite.name, "family": family.name}


class _Maps:
    """The first measurement's maps as `write_attention_maps` reads them (`mean_patterns`, `step`)."""

    def __init__(self, mean_patterns: Any, step: int) -> None:
        self.mean_patterns, self.step = mean_patterns, step


def checkpoint_row(net: Any, model: Any, family: Any, cm: Any, layer_means: Any, role_counts: Any) -> dict[str, Any]:
    """One checkpoint's line in its job's summary.json `checkpoints`."""
    row = {"model": model_facts(net, model, family), "roles": cm.m.roles, "role_counts": role_counts(cm.m.roles),
           "measure_s": round(cm.m.capture_s + cm.m.metrics_s, 3), "layers": layer_means(cm.m)}
    if cm.lm is not None:
        row["lm"] = cm.lm_facts()
    return row


def refuse_foreign(out: Path, name: str, marker: str) -> None:
    """A suite folder is written only if it is new, empty, or this suite's own (a rerun resumes it)."""
    import yaml

    if out.is_file():
        raise ConfigError("run_dir", str(out), "a folder for the suite's jobs (it is a file)")
    if not out.is_dir() or not any(out.iterdir()):
        return
    multirun = out / "multirun.yaml"
    try:
        stored = yaml.safe_load(multirun.read_text(encoding="utf-8")) if multirun.is_file() else None
    except (OSError, yaml.YAMLError):
        stored = None
    if not (isinstance(stored, dict) and stored.get("hydra", {}).get("sweeper", {}).get("_target_") == marker
            and stored.get("suite", {}).get("name") == name):
        raise ConfigError("run_dir", str(out), f"a new or empty folder, or suite {name}'s own (to resume it); "
                          "it holds something else")


def write_pretrained_view(net: Any, tokenizer: Any, settings: Any, run: RunDir) -> Path:
    """view.html, the page a trained run gets (one step), with its token view: the first 8 probe
    sentences' maps stored as training stores them (probe_patterns/, step 0)."""
    import numpy as np

    from headlab.hf.analyze import build_probe
    from headlab.lit.callbacks.probe_patterns import ProbePatterns
    from headlab.view import write_view

    patterns = ProbePatterns()
    patterns.select(build_probe(tokenizer, settings)[0], tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))))
    with np.load(run.attention_maps_path, allow_pickle=False) as maps:
        patterns.write(run.path, net, 0, maps["mean_pattern"])
    return write_view(run)


def importance_fit(cfg: Any) -> Any:
    """The checked `ImportanceFit` when `importance=true` (None otherwise); a source without labels is refused."""
    if not cfg.importance:
        return None
    from headlab.hf.importance import ImportanceFit
    from headlab.hf.texts import LABELED_SOURCES

    if cfg.data.source not in LABELED_SOURCES:
        raise ConfigError("importance", True, f"a labelled data source ({', '.join(LABELED_SOURCES)}); "
                          f"data.source={cfg.data.source} has no labels")
    return ImportanceFit(**OmegaConf.to_container(cfg.classifier, resolve=True), max_len=cfg.data.max_len)


def default_run_dir() -> Path:
    from datetime import datetime

    from headlab.store.run_info import default_log_dir

    return default_log_dir() / "runs" / "analyze_hf" / datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f")
