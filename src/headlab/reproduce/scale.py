"""The scale a verdict was reached at, in one short text (issue 31 item 3).

"reversed" means one thing at 2 layers x 128 trained for 2 epochs and another at the article's
12 x 768: every verdict says where it was reached, e.g. "2 layers x 128, heads 4/8/16, 2 epochs
(1,510 steps), zh_reviews (max_len 128, cls), 8 seeds". A value that differs between the jobs (a
swept one) is shown as all its values, "4/8/16".

`scale_text` is pure (settings in, text out); `evidence_scale` reads a claim's evidence for it: each
job's saved config (`.hydra/config.yaml`, plain YAML: nothing in it runs) and summary.json (the steps
trained; a pretrained model's size), or, for a computed claim, the measurement the spec names.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Mapping, Sequence

# the settings of a job that make its scale (dotted config keys)
SCALE_KEYS = ("model.n_layers", "model.d_model", "model.n_heads", "trainer.max_epochs", "trainer.max_steps",
              "data.source", "data.max_len", "model.pooling", "data.train_fraction", "distill.labels", "seed")
STEPS = "steps"            # the steps a job trained (summary.json's global_step)
PRETRAINED = "pretrained"  # the name of a pretrained model measured without training (headlab-analyze-hf)


def scale_text(jobs: Sequence[Mapping[str, Any]]) -> str:
    """The scale of the jobs whose settings are `jobs` (keys of `SCALE_KEYS`, `STEPS`, `PRETRAINED`;
    a missing or None value is unknown and left out); "" when nothing is known.

    >>> jobs = [{"model.n_layers": 2, "model.d_model": 128, "model.n_heads": h, "trainer.max_epochs": 2,
    ...          "data.source": "zh_reviews", "data.max_len": 128, "model.pooling": "cls", "seed": s}
    ...         for h in (4, 8, 16) for s in range(10, 18)]
    >>> scale_text(jobs)
    '2 layers x 128, heads 4/8/16, 2 epochs, zh_reviews (max_len 128, cls), 8 seeds'
    """
    parts = [_pretrained(jobs), _size(jobs), _heads(jobs), _length(jobs), _data(jobs), _count(jobs, "seed", "seed")]
    return ", ".join(p for p in parts if p)


def computed_text(measurement: str, args: Mapping[str, Any], n_seeds: int) -> str:
    """A computed claim's scale: the measurement as called, and its seeds.

    >>> computed_text("initialised_queries", {"d_model": 768, "n_heads": 12}, 10)
    'initialised_queries(d_model=768, n_heads=12) computed without training, 10 seeds'
    """
    call = ", ".join(f"{k}={_text(v)}" for k, v in args.items())
    return f"{measurement}({call}) computed without training, {_plural(n_seeds, 'seed')}"


# ---- the parts of the text ------------------------------------------------------------------------

def _values(jobs: Sequence[Mapping[str, Any]], key: str) -> list[Any]:
    """The distinct known values of `key`, numbers in ascending order, the rest as first seen."""
    seen = list(dict.fromkeys(j.get(key) for j in jobs if j.get(key) is not None))
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seen)
    return sorted(seen) if numbers else seen


def _shown(jobs: Sequence[Mapping[str, Any]], key: str) -> str:
    return "/".join(_text(v) for v in _values(jobs, key))


def _text(v: Any) -> str:
    """1.0 -> "1", 0.05 -> "0.05", 1510 -> "1,510" (a count), text as it is."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _plural(n: Any, word: str) -> str:
    return f"{_text(n)} {word}" + ("" if n == 1 else "s")


def _pretrained(jobs: Sequence[Mapping[str, Any]]) -> str:
    names = _shown(jobs, PRETRAINED)
    return f"pretrained {names}" if names else ""


def _size(jobs: Sequence[Mapping[str, Any]]) -> str:
    layers, width = _values(jobs, "model.n_layers"), _shown(jobs, "model.d_model")
    shown = "/".join(_text(v) for v in layers)
    depth = f"{shown} layer{'' if layers == [1] else 's'}" if layers else ""
    if depth and width:
        return f"{depth} x {width}"
    return depth or (f"d_model {width}" if width else "")


def _heads(jobs: Sequence[Mapping[str, Any]]) -> str:
    heads = _values(jobs, "model.n_heads")
    if len(heads) > 1:
        return f"heads {'/'.join(_text(v) for v in heads)}"
    return _plural(heads[0], "head") if heads else ""


def _length(jobs: Sequence[Mapping[str, Any]]) -> str:
    """Training length as set (max_steps when set, else max_epochs), with the steps trained beside
    epochs (a range when the jobs differ); "no training" for a pretrained model."""
    max_steps = [v for v in _values(jobs, "trainer.max_steps") if v > 0]
    steps = _values(jobs, STEPS)
    trained = "" if not steps else (_text(steps[0]) if len(steps) == 1 else f"{_text(steps[0])}-{_text(steps[-1])}")
    if max_steps:
        text = f"{'/'.join(_text(v) for v in max_steps)} steps"
        return text + (f" (trained {trained})" if trained and steps != max_steps else "")
    epochs = _values(jobs, "trainer.max_epochs")
    if epochs:
        text = f"{'/'.join(_text(v) for v in epochs)} epoch{'' if epochs == [1] else 's'}"
        return text + (f" ({trained} steps)" if trained else "")
    if trained:
        return f"{trained} steps"
    return "no training" if _values(jobs, PRETRAINED) else ""


def _data(jobs: Sequence[Mapping[str, Any]]) -> str:
    """The data's name with what bounds it: max_len, pooling, the train share (when not all of it),
    the labels a distilled student learns from."""
    inner = [f"max_len {_shown(jobs, 'data.max_len')}" if _values(jobs, "data.max_len") else "",
             _shown(jobs, "model.pooling")]
    shares = _values(jobs, "data.train_fraction")
    if shares and shares != [1] and shares != [1.0]:
        inner.append(f"train share {'/'.join(_text(v) for v in shares)}")
    labels = _values(jobs, "distill.labels")
    if labels:
        inner.append(f"{'/'.join(_text(v) for v in labels)} labels")
    inner = [p for p in inner if p]
    name = _shown(jobs, "data.source")
    if not (name or inner):
        return ""
    return (name or "data") + (f" ({', '.join(inner)})" if inner else "")


def _count(jobs: Sequence[Mapping[str, Any]], key: str, word: str) -> str:
    n = len(_values(jobs, key))
    return _plural(n, word) if n else ""


# ---- reading a claim's evidence ------------------------------------------------------------------

def job_settings(job_dir: Path) -> dict[str, Any]:
    """A job's `SCALE_KEYS` from its saved config and the steps it trained from its summary.json; a
    pretrained model's (headlab-analyze-hf) name and size from its summary's `model` block."""
    from omegaconf import OmegaConf

    from headlab.store import RunDir

    run = RunDir(job_dir)
    cfg = OmegaConf.load(run.hydra_config_path)
    values = {key: _plain(OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False))
              for key in SCALE_KEYS}
    if values["data.source"] is None and run.hydra_file_path.is_file():  # an LM's data has no `source`: its group's choice
        choices = OmegaConf.select(OmegaConf.load(run.hydra_file_path), "hydra.runtime.choices", default=None)
        values["data.source"] = _plain(choices.get("data")) if choices is not None else None
    summary = run.summary
    values[STEPS] = summary.get("global_step")
    model = summary.get("model")
    if summary.get("kind") == "analyze_hf" and isinstance(model, dict):
        values[PRETRAINED] = model.get("name") or model.get("path")
        values["model.n_layers"], values["model.n_heads"] = model.get("n_layers"), model.get("n_heads")
        if isinstance(model.get("n_heads"), int) and isinstance(model.get("d_head"), int):
            values["model.d_model"] = model["n_heads"] * model["d_head"]
    return values


def _plain(value: Any) -> Any:
    """A scalar as it is; a list or mapping (not a scale setting) as unknown."""
    return value if isinstance(value, (int, float, str, bool)) else None


def job_dirs(folder: Path) -> list[Path]:
    """The jobs of a sweep folder (each dir with a saved config), or the run dir `folder` itself."""
    from headlab.store.run_dir import CONFIG_FILE, HYDRA_DIR

    if (folder / HYDRA_DIR / CONFIG_FILE).is_file():
        return [folder]
    return sorted(p.parent.parent for p in folder.glob(f"*/{HYDRA_DIR}/{CONFIG_FILE}"))


def evidence_scale(spec, folder: Path | None) -> str:
    """The scale of a claim's evidence: its computed measurement, or the jobs in `folder` (a sweep
    folder or a run dir) whose saved config parses; "" when there is none."""
    if spec.evidence.kind == "computed":
        return computed_scale(spec)
    if folder is None:
        return ""
    return scale_text([job_settings(job) for job in job_dirs(folder) if _readable(job)])


def _readable(job: Path) -> bool:
    """Whether the job's saved config parses (a truncated one is left out of the scale, not fatal)."""
    from omegaconf import OmegaConf

    from headlab.store import RunDir

    try:
        return OmegaConf.is_dict(OmegaConf.load(RunDir(job).hydra_config_path))
    except Exception:  # noqa: BLE001 - any YAML error: the report still has to be written
        return False


def computed_scale(spec) -> str:
    """The primary statistic's measurement (every computed one when there is no primary), called
    with the spec's arguments over the function's defaults."""
    from headlab.reproduce.directions import MEASUREMENTS

    chosen = [spec.statistics[spec.primary]] if spec.primary in spec.statistics else list(spec.statistics.values())
    texts = []
    for s in chosen:
        name = s.measurement.name
        defaults = {k: p.default for k, p in inspect.signature(MEASUREMENTS[name]).parameters.items()
                    if k != "seed" and p.default is not inspect.Parameter.empty}
        texts.append(computed_text(name, {**defaults, **dict(s.args)}, len(s.seeds)))
    return "; ".join(dict.fromkeys(texts))


def suite_text(suite: str, models: Sequence[Mapping[str, Any]], steps: Sequence[int], data: Mapping[str, Any],
               n_seeds: int, at_step: int | None = None) -> str:
    """A suite's scale: its name, the models' family and size, the steps read, the probe and the seeds.

    >>> suite_text("polypythia-70m", [{"family": "gpt_neox", "n_layers": 6, "n_heads": 8, "d_head": 64}],
    ...            [0, 1, 512, 143000], {"source": "en_news", "max_len": 128}, 10)
    'pretrained suite polypythia-70m: gpt_neox 6 layers x 512, 8 heads, 4 checkpoints (steps 0-143,000), en_news (max_len 128), 10 seeds'
    """
    sizes = [{"model.n_layers": m.get("n_layers"), "model.n_heads": m.get("n_heads"),
              "model.d_model": m["n_heads"] * m["d_head"] if isinstance(m.get("n_heads"), int) and isinstance(m.get("d_head"), int) else None}
             for m in models]
    family = "/".join(dict.fromkeys(str(m.get("family")) for m in models if m.get("family")))
    size = ", ".join(p for p in (_size(sizes), _heads(sizes)) if p)
    if at_step is not None:
        length = f"the step-{_text(at_step)} checkpoints"
    elif steps:
        length = f"{_plural(len(steps), 'checkpoint')} (steps {_text(min(steps))}-{_text(max(steps))})"
    else:
        length = ""
    probe = f"{data.get('source')} (max_len {_text(data.get('max_len'))})" if data.get("source") and at_step is None else ""
    head = f"pretrained suite {suite}" + (f": {family} {size}".rstrip() if family or size else "")
    return ", ".join(p for p in (head, length, probe, _plural(n_seeds, "seed")) if p)


def suite_scale(folder: Path, at_step: int | None = None) -> str:
    """The scale of a suite folder headlab-analyze-hf wrote: each seed's summary.json (its suite, the
    model facts of its checkpoints, the steps measured, the probe)."""
    from headlab.store import RunDir

    summaries = [RunDir(p.parent).summary for p in sorted(folder.glob("*/summary.json"))]
    summaries = [s for s in summaries if isinstance(s, dict) and s.get("kind") == "analyze_hf_suite"]
    if not summaries:
        return ""
    models = [c["model"] for s in summaries for c in (s.get("checkpoints") or [])[-1:] if isinstance(c.get("model"), dict)]
    steps = sorted({int(c["step"]) for s in summaries for c in (s.get("checkpoints") or []) if "step" in c})
    return suite_text(str(summaries[0].get("suite")), models[:1], steps, summaries[0].get("data") or {}, len(summaries), at_step)
