"""One `headlab-analyze-hf` run: a pretrained encoder measured on a probe set into a run directory.

Everything that can fail on the user's input (the source, the model folder, mostly-[UNK] data, the
importance fit) is checked and computed before the run directory is created, so a mistake writes
nothing; then `headlab.hf.analyze` writes the same run contract as a training run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from headlab.errors import ConfigError
from headlab.store import RunDir, atomic_write_text


def analyze_pretrained(cfg: Any) -> dict[str, Any]:
    """Load the model, measure it, write the run contract; returns the summary."""
    from headlab.store.run_info import config_digest, configure_cache_dirs
    from headlab.tasks.threads import set_torch_threads
    from headlab.hf import AnalyzeSettings, HFEncoder, analyze, load_encoder, resolve_model_path
    from headlab.hf.texts import SOURCES

    from headlab.tasks.lock import refuse_occupied

    if cfg.run_dir:  # before any loading: never a write into a folder holding another run (or a file)
        refuse_occupied(Path(cfg.run_dir), "run_dir", "headlab-analyze-hf's tables and figures")
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
    atomic_write_text(RunDir(run_dir).hydra_config_path, OmegaConf.to_yaml(cfg, resolve=True))
    facts = {"run_dir": str(run_dir), "config_digest": config_digest(cfg),
             "model": {"name": cfg.model.name if not cfg.model.path else None, "path": str(folder),
                       "n_layers": len(net.blocks), "n_heads": net.n_heads, "d_head": net.blocks[0].attn.d_head,
                       "architecture": type(model).__name__}}
    summary = analyze(net, tokenizer, settings, run_dir, facts, importance, importance_facts)
    write_pretrained_view(net, tokenizer, settings, RunDir(run_dir))
    return summary


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
