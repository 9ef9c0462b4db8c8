"""Checkpoint suites as the time axis: (seed, step, source) per checkpoint, measured into a sweep-shaped folder.

A suite file (conf/suite/NAME.yaml, or any YAML path) names its checkpoints in one of two forms:

    name: pythia-70m
    seeds:                                  # per seed: a source template ({seed}, {step}, {kstep} = step // 1000)
      0: {hub: EleutherAI/pythia-70m, revision: "step{step}"}
    steps: [0, 1, 2, 4, ..., 143000]

    name: my-suite
    checkpoints:                            # or one entry per checkpoint
      - {seed: 0, step: 0, path: seed0/step0}   # a path relative to the suite file's folder
      - {seed: 0, step: 10, hub: org/model, revision: abc123}

`measure_suite` writes what `headlab-train -m seed=...` writes: `multirun.yaml` and one job folder
per seed (`0/`, `1/`, ...: `.hydra/overrides.yaml` = `seed=S`, `summary.json` with `swept.seed`),
each holding one measurement per step in `head_metrics.parquet` / `head_pairs.parquet` (the run
contract), so `headlab-aggregate`, `headlab-view` and the sweep tables read it unchanged. A
checkpoint whose head_metrics part exists is skipped (resume); one checkpoint is in memory at a
time. Hub sources are fetched (config, weights, tokenizer files only) into the Hugging Face cache
only with `download=true`; otherwise a checkpoint not already cached is a one-line error naming
what would be downloaded, raised before anything is written.
"""

from __future__ import annotations

import gc
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from headlab.errors import ConfigError
from headlab.store import RunDir, SweepDir, atomic_write_text

TOKENIZER_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
                   "vocab.json", "merges.txt", "tokenizer.model"]  # a hub folder's files, not the run contract's
SAFE_FILES = ["*.safetensors", "model.safetensors.index.json"]
PICKLE_FILES = ["pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*.bin"]
HUB_FILES = TOKENIZER_FILES + SAFE_FILES + PICKLE_FILES
SUITE_MARKER = "headlab.hf.suite"  # multirun.yaml's sweeper target: not Hydra's, so no job list is re-expanded


@dataclass(frozen=True)
class Checkpoint:
    seed: int
    step: int
    path: str | None = None  # a local folder
    hub: str | None = None  # or a hub id and revision
    revision: str | None = None

    @property
    def label(self) -> str:
        return self.path if self.path is not None else f"{self.hub}@{self.revision or 'main'}"


@dataclass(frozen=True)
class Suite:
    name: str
    checkpoints: tuple[Checkpoint, ...]
    origin: str  # the file it was read from

    @property
    def seeds(self) -> list[int]:
        return sorted({c.seed for c in self.checkpoints})

    def of_seed(self, seed: int) -> list[Checkpoint]:
        return sorted((c for c in self.checkpoints if c.seed == seed), key=lambda c: c.step)


def shipped_suites() -> dict[str, Path]:
    """conf/suite/*.yaml by name."""
    import headlab.conf

    folder = Path(headlab.conf.__file__).parent / "suite"
    return {p.stem: p for p in sorted(folder.glob("*.yaml"))}


def suite_file(value: str) -> Path:
    """A shipped suite's name, a YAML file, or a folder holding suite.yaml."""
    shipped = shipped_suites()
    if value in shipped:
        return shipped[value]
    path = Path(value).expanduser()
    if path.is_dir() and (path / "suite.yaml").is_file():
        return path / "suite.yaml"
    if path.is_file():
        return path
    raise ConfigError("suite", value, f"one of {list(shipped)}, a suite YAML file, or a folder holding suite.yaml")


def load_suite(value: str) -> Suite:
    """Read and check a suite; local paths resolve against the suite file's folder."""
    path = suite_file(value)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError("suite", value, f"a readable suite YAML ({type(exc).__name__}: {exc})") from None
    if not isinstance(raw, dict) or not (("seeds" in raw and "steps" in raw) or "checkpoints" in raw):
        raise ConfigError("suite", value, "a YAML mapping with `seeds` + `steps`, or `checkpoints` (headlab.hf.suite)")
    entries: list[dict[str, Any]] = []
    if "checkpoints" in raw:
        entries += list(raw["checkpoints"] or [])
    if "seeds" in raw:
        seeds, steps = raw["seeds"], raw["steps"]
        if not isinstance(seeds, dict) or not isinstance(steps, list):
            raise ConfigError("suite", value, "`seeds` a mapping seed -> source template, `steps` a list of integers")
        for seed, template in seeds.items():
            for step in steps:
                entries.append({"seed": seed, "step": step, **{k: _fill(v, seed, step) for k, v in dict(template).items()}})
    checkpoints = [_checkpoint(e, path.parent, value) for e in entries]
    keys = [(c.seed, c.step) for c in checkpoints]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ConfigError("suite", value, f"one checkpoint per (seed, step); seed {dup[0]} step {dup[1]} appears twice")
    if not checkpoints:
        raise ConfigError("suite", value, "at least one checkpoint")
    return Suite(str(raw.get("name") or path.stem), tuple(checkpoints), str(path))


def _fill(template: Any, seed: Any, step: Any) -> Any:
    if not isinstance(template, str):
        return template
    return template.format(seed=seed, step=step, kstep=int(step) // 1000)


def _checkpoint(entry: Any, root: Path, value: str) -> Checkpoint:
    if not isinstance(entry, dict):
        raise ConfigError("suite", value, f"checkpoint entries as mappings; got {entry!r}")
    seed, step = entry.get("seed"), entry.get("step")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0 or not isinstance(step, int) or step < 0:
        raise ConfigError("suite", value, f"integer seed and step >= 0 in every checkpoint; got seed={seed!r} step={step!r}")
    if ("path" in entry) == ("hub" in entry):
        raise ConfigError("suite", value, f"exactly one of path or hub per checkpoint (seed {seed} step {step})")
    if "path" in entry:
        path = Path(str(entry["path"])).expanduser()
        return Checkpoint(seed, step, path=str(path if path.is_absolute() else root / path))
    revision = entry.get("revision")
    return Checkpoint(seed, step, hub=str(entry["hub"]), revision=None if revision is None else str(revision))


def cached_folder(c: Checkpoint, cache_dir: str | None, download: bool) -> Path | None:
    """The local folder of a hub checkpoint: from the cache, or fetched when `download`; None when not cached."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(c.hub, revision=c.revision, allow_patterns=HUB_FILES, cache_dir=cache_dir,
                                      local_files_only=True))
    except Exception:  # noqa: BLE001 - any miss (no snapshot, no ref) means: not cached
        if not download:
            return None
    try:
        from huggingface_hub import list_repo_files

        files = list_repo_files(c.hub, revision=c.revision)  # safetensors when the revision has them, else the .bin
        weights = SAFE_FILES if any(f.endswith(".safetensors") for f in files) else PICKLE_FILES
        return Path(snapshot_download(c.hub, revision=c.revision, allow_patterns=TOKENIZER_FILES + weights,
                                      cache_dir=cache_dir))
    except Exception as exc:  # noqa: BLE001 - network, auth, missing revision: one line naming the checkpoint
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError("suite", c.label, f"a hub checkpoint that downloads ({type(exc).__name__}: {first[:200]})") from None


def check_sources(suite: Suite, cache_dir: str | None, download: bool) -> None:
    """Before anything is written: local folders exist; hub checkpoints are cached, or `download` is on
    and the first missing one downloads (so a machine without network fails here, writing nothing)."""
    from headlab.hf.loading import check_model_folder

    missing = []
    for c in suite.checkpoints:
        if c.path is not None:
            check_model_folder(Path(c.path), "suite", f"{suite.name} seed {c.seed} step {c.step}: {c.path}")
        elif cached_folder(c, cache_dir, download=False) is None:
            missing.append(c)
    if missing and not download:
        raise ConfigError("suite", suite.name, f"its {len(missing)} hub checkpoints cached locally; not cached: "
                          f"{missing[0].label} ... {missing[-1].label} (config, weights and tokenizer files of each, "
                          f"{len(missing)} downloads); rerun with download=true on a machine that reaches the hub")
    if missing:
        cached_folder(missing[0], cache_dir, download=True)


def measure_suite(suite: Suite, out: Path, measure: Callable[[Path, int, Path], dict[str, Any]],
                  facts: dict[str, Any], config_yaml: str, cache_dir: str | None = None, download: bool = False,
                  log: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> dict[str, Any]:
    """Measure every checkpoint of `suite` into the sweep folder `out`, skipping those already measured.

    `measure(folder, step, job_dir)` loads one checkpoint, measures it, writes its rows at `step` into
    `job_dir` and returns that checkpoint's summary facts (then the model is dropped). Returns counts."""
    sweep = SweepDir(out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(sweep.multirun_path, yaml.safe_dump({
        "hydra": {"sweeper": {"_target_": SUITE_MARKER}, "job": {"name": "analyze_hf_suite"}},
        "suite": {"name": suite.name, "origin": suite.origin, "seeds": suite.seeds,
                  "n_checkpoints": len(suite.checkpoints)}}, sort_keys=False))
    total, done, skipped, started = len(suite.checkpoints), 0, 0, time.perf_counter()
    for job, seed in enumerate(suite.seeds):
        run = RunDir(sweep.job_path(job))
        run.path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run.hydra_overrides_path, yaml.safe_dump([f"seed={seed}"]))
        atomic_write_text(run.hydra_config_path, config_yaml)
        summary = _job_summary(run, seed, suite, facts)
        for c in suite.of_seed(seed):
            index = done + skipped + 1
            if measured(run, c.step):
                skipped += 1
                log(f"[{index}/{total}] seed {seed} step {c.step}: already measured, skipped")
                continue
            t0 = time.perf_counter()
            folder = Path(c.path) if c.path is not None else cached_folder(c, cache_dir, download)
            assert folder is not None  # check_sources ran first
            _drop_partial(run, c.step)
            row = measure(folder, c.step, run.path)
            gc.collect()  # the checkpoint's model goes before the next one loads
            row.update({"step": c.step, "source": c.label, "seconds": round(time.perf_counter() - t0, 3)})
            summary["checkpoints"] = sorted([r for r in summary["checkpoints"] if r["step"] != c.step] + [row],
                                            key=lambda r: r["step"])
            run.write_summary(summary)
            done += 1
            log(f"[{index}/{total}] seed {seed} step {c.step}: measured in {row['seconds']:.1f} s ({c.label})")
        summary["status"] = "completed"
        summary["steps"] = [r["step"] for r in summary["checkpoints"]]
        last = summary["checkpoints"][-1]
        summary["last"] = {"step": last["step"], "roles": last.get("roles")}
        summary["roles"] = last.get("roles")
        summary["wall_s"] = round(sum(r["seconds"] for r in summary["checkpoints"]), 3)
        summary["measure_s"] = summary["wall_s"]
        run.write_summary(summary)
    return {"out": str(out), "n_checkpoints": total, "measured": done, "skipped": skipped, "n_seeds": len(suite.seeds),
            "wall_s": time.perf_counter() - started}


def _job_summary(run: RunDir, seed: int, suite: Suite, facts: dict[str, Any]) -> dict[str, Any]:
    """The job's summary: the stored one on a resume (status back to running), else a fresh one."""
    if run.has_summary:
        try:
            stored = run.load_summary()
            if isinstance(stored, dict) and stored.get("suite") == suite.name and isinstance(stored.get("checkpoints"), list):
                return {**stored, "status": "running"}
        except (OSError, ValueError):
            pass
    return {"status": "running", "kind": "analyze_hf_suite", "run_id": run.path.name, "suite": suite.name,
            "swept": {"seed": seed}, **facts, "checkpoints": []}


def measured(run: RunDir, step: int) -> bool:
    """The step's head_metrics part exists (written last for a checkpoint: it marks the step done)."""
    return (run.head_metrics_path / f"part-{step:09d}-0000.parquet").is_file()


def _drop_partial(run: RunDir, step: int) -> None:
    """A checkpoint interrupted after its head_pairs part but before head_metrics: its parts go, it is re-measured."""
    for table in (run.head_pairs_path, run.head_metrics_path):
        if table.is_dir():
            for part in table.glob(f"part-{step:09d}-*.parquet"):
                part.unlink()


def suite_lines(suite: Suite, cache_dir: str | None = None, cached: bool = True) -> list[str]:
    """What measuring `suite` loads, one line per seed (its steps and where they come from), then the
    total and, with `cached`, how many hub checkpoints are already in the local cache (nothing downloads)."""
    lines = [f"suite {suite.name} ({suite.origin}): {len(suite.checkpoints)} checkpoints, "
             f"{len(suite.seeds)} seeds"]
    missing = 0
    for seed in suite.seeds:
        points = suite.of_seed(seed)
        steps = [c.step for c in points]
        shown = ", ".join(str(s) for s in steps) if len(steps) <= 6 else \
            f"{', '.join(str(s) for s in steps[:4])}, ..., {steps[-1]}"
        sources = sorted({c.hub for c in points if c.hub is not None})
        where = (f"hub {', '.join(sources)} (revisions {points[0].revision} ... {points[-1].revision})" if sources
                 else f"local {Path(points[0].path).parent}")
        lines.append(f"seed {seed}: {len(points)} steps ({shown}) from {where}")
        if cached:
            missing += sum(1 for c in points if c.hub is not None and cached_folder(c, cache_dir, download=False) is None)
    hub = sum(1 for c in suite.checkpoints if c.hub is not None)
    if cached and hub:
        lines.append(f"{hub - missing} of {hub} hub checkpoints in the local cache; the other {missing} download "
                     f"with download=true (config, tokenizer, weights)")
    return lines
