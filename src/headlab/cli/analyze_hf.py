"""`headlab-analyze-hf [model=minilm] [data=zh_reviews|...] [importance=true] [key=value ...]`: measure a pretrained encoder.

Composes `conf/hf/analyze.yaml` with the chosen `conf/hf/model/` and `conf/hf/data/` files and the
dotted overrides, checked against the typed schema below (a wrong key, type or choice is one
line and exit 2, before anything is loaded or written), then runs `headlab.hf.analyze` and prints
the run directory. Nothing downloads (HF_HUB_OFFLINE=1).

`importance=true` (a labelled source: en_polarity, synthetic, files, zh_reviews) also fits a linear
head on a seeded, stratified train part (`classifier.*`) and scores every head on the held-out
part by single-head ablation and gradient importance (`headlab.hf.importance`), computed before
anything is written.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from headlab.errors import ConfigError, HeadlabError

PROG = "headlab-analyze-hf"
EXIT_CONFIG = 2
GROUPS = ("model", "data")


@dataclass
class ModelSection:
    name: Optional[str] = "minilm"
    path: Optional[str] = None


@dataclass
class SyntheticSection:
    n: int = 2000
    seed: int = 0


@dataclass
class DataSection:
    source: str = "zh_reviews"
    path: Optional[str] = None
    probe_size: int = 256
    max_len: int = 128
    seed: int = 0
    max_unk_rate: float = 0.5
    synthetic: SyntheticSection = field(default_factory=SyntheticSection)


@dataclass
class MeasureSection:
    chunk_size: int = 32
    map_len: int = 32
    weight_metrics: bool = True


@dataclass
class ClassifierSection:
    """The linear head `importance=true` fits (headlab.hf.importance.ImportanceFit)."""

    test_share: float = 0.5
    seed: int = 0
    steps: int = 200
    lr: float = 0.1
    batch_size: int = 32


@dataclass
class AnalyzeHFConfig:
    """The schema every composed config is checked against (types and keys)."""

    model: ModelSection = field(default_factory=ModelSection)
    data: DataSection = field(default_factory=DataSection)
    measure: MeasureSection = field(default_factory=MeasureSection)
    importance: bool = False
    classifier: ClassifierSection = field(default_factory=ClassifierSection)
    threads: Optional[int] = None
    run_dir: Optional[str] = None


def compose(overrides: list[str]) -> DictConfig:
    """The config `headlab-analyze-hf overrides...` runs with; ConfigError names a bad override."""
    root = files("headlab.conf") / "hf"
    base = OmegaConf.create((root / "analyze.yaml").read_text(encoding="utf-8"))
    choices = {group: str(base[group]) for group in GROUPS}
    dotted = []
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(item, None, "key=value (e.g. data=en_polarity or data.probe_size=64)")
        if key in GROUPS:
            choices[key] = value
        else:
            dotted.append(item)
    layers = [OmegaConf.structured(AnalyzeHFConfig)]
    for group, choice in choices.items():
        options = sorted(p.name[:-5] for p in (root / group).iterdir() if p.name.endswith(".yaml"))
        if choice not in options:
            raise ConfigError(group, choice, f"one of {options} (conf/hf/{group}/)")
        layers.append(OmegaConf.create({group: OmegaConf.create((root / group / f"{choice}.yaml").read_text("utf-8"))}))
    layers.append(OmegaConf.masked_copy(base, [k for k in base if k not in GROUPS]))
    given = dict(item.split("=", 1) for item in dotted)
    try:
        cfg = OmegaConf.merge(*layers)
        for key in given:
            _check_key(cfg, key, given[key])
        cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist(dotted))
        OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except OmegaConfBaseException as exc:
        key = str(getattr(exc, "full_key", None) or "?")
        raise ConfigError(key, given.get(key), _first_line(exc)) from None
    return cfg


def _check_key(cfg: DictConfig, key: str, value: str) -> None:
    """An override must name an existing key; the error lists the keys of its section."""
    parent, _, leaf = key.rpartition(".")
    section = OmegaConf.select(cfg, parent) if parent else cfg
    if not isinstance(section, DictConfig):
        parent, section = "", cfg
    if leaf not in section or key.rpartition(".")[0] != parent:
        keys = sorted(section.keys()) if isinstance(section, DictConfig) else []
        raise ConfigError(key, value, f"an existing key{f' of {parent}' if parent else ''}: {', '.join(map(str, keys))}")


def run(cfg: DictConfig) -> dict[str, Any]:
    """Load the model, measure it, write the run contract; returns the summary."""
    from headlab.run.threads import set_torch_threads
    from headlab.run.info import config_digest, configure_cache_dirs
    from headlab.hf import AnalyzeSettings, HFEncoder, analyze, load_encoder, resolve_model_path
    from headlab.store import atomic_write_text

    from headlab.hf.texts import SOURCES

    if cfg.data.source not in SOURCES:  # before any loading: a typo answers at once
        raise ConfigError("data.source", cfg.data.source, f"one of {list(SOURCES)}")
    if cfg.data.source == "files" and not cfg.data.get("path"):
        raise ConfigError("data.path", None, "a CSV or JSONL file with a text column (data=files data.path=...)")
    fit = importance_fit(cfg)
    folder = resolve_model_path(cfg.model.name, cfg.model.path)  # before the run dir: a bad path writes nothing
    settings = AnalyzeSettings(source=cfg.data.source, path=cfg.data.path, probe_size=cfg.data.probe_size,
                               max_len=cfg.data.max_len, seed=cfg.data.seed, max_unk_rate=cfg.data.max_unk_rate,
                               synthetic_n=cfg.data.synthetic.n, synthetic_seed=cfg.data.synthetic.seed,
                               chunk_size=cfg.measure.chunk_size, map_len=cfg.measure.map_len,
                               weight_metrics=cfg.measure.weight_metrics)
    set_torch_threads(cfg.threads)
    model, tokenizer = load_encoder(folder, "model.path" if cfg.model.path else "model.name")
    net = HFEncoder(model, str(cfg.model.path or cfg.model.name))
    from headlab.hf.analyze import build_probe

    build_probe(tokenizer, settings)  # refuses mostly-[UNK] data before the run dir exists
    importance = importance_facts = None
    if fit is not None:  # computed before the run dir exists: a failure writes nothing
        from headlab.hf.importance import head_importance, importance_summary
        from headlab.hf.texts import load_labeled

        data = load_labeled(cfg.data.source, cfg.data.path, cfg.data.synthetic.n, cfg.data.synthetic.seed)
        importance = head_importance(net, tokenizer, data, fit)
        importance_facts = importance_summary(importance, fit)
    run_dir = Path(cfg.run_dir) if cfg.run_dir else default_run_dir()
    run_dir.mkdir(parents=True, exist_ok=True)
    configure_cache_dirs(run_dir.parent)  # matplotlib caches beside the runs, never in the home directory
    atomic_write_text(run_dir / ".hydra" / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    facts = {"run_dir": str(run_dir), "config_digest": config_digest(cfg),
             "model": {"name": cfg.model.name if not cfg.model.path else None, "path": str(folder),
                       "n_layers": len(net.blocks), "n_heads": net.n_heads, "d_head": net.blocks[0].attn.d_head,
                       "architecture": type(model).__name__}}
    return analyze(net, tokenizer, settings, run_dir, facts, importance, importance_facts)


def importance_fit(cfg: DictConfig) -> Any:
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

    from headlab.run.info import default_log_dir

    return default_log_dir() / "runs" / "analyze_hf" / datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip().splitlines()[0].strip("`"))
        return 0
    t0 = time.perf_counter()
    try:
        summary = run(compose(argv))
    except HeadlabError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_CONFIG
    print(summary["run_dir"])
    print(f"{PROG}: {summary['model']['n_layers']} layers x {summary['model']['n_heads']} heads on "
          f"{summary['data']['probe_size']} {summary['data']['source']} texts ([UNK] {summary['data']['unk_rate']:.1%}) "
          f"in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if "importance" in summary:
        imp = summary["importance"]
        print(f"{PROG}: importance on {imp['n_test']} held-out texts (acc {imp['test']['acc']:.3f}): "
              f"{imp['heads_for_half_ablation_effect']} of {imp['n_heads']} heads carry half the ablation effect; "
              f"top {', '.join(imp['top_heads']['ablation'][:3])}", file=sys.stderr)
    return 0


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
