"""Hand-made sweep folders whose jobs record a configuration (`.hydra/config.yaml`, `hydra.yaml`), as
headlab-train writes them: the evidence guard reads these, so every hand-made aggregate needs them."""

from __future__ import annotations

import itertools
from pathlib import Path

import yaml

from headlab.reproduce.provenance import expected_grid


def record_jobs(sweep_dir: Path, spec, scale: str = "quick", **changes: list[str]) -> list[Path]:
    """One job dir per combination of the spec's grid at `scale` (`changes`: key -> values to record
    instead, e.g. another grid under the same folder name); returns the job dirs."""
    grid = expected_grid(spec.evidence.sweep, spec.overrides(scale))
    grid.update({k.replace("__", "."): v for k, v in changes.items()})
    keys = list(grid)
    jobs = []
    for i, values in enumerate(itertools.product(*(grid[k] for k in keys))):
        job = sweep_dir / str(i)
        (job / ".hydra").mkdir(parents=True, exist_ok=True)
        config: dict = {}
        choices: dict = {}
        for key, value in zip(keys, values):
            parsed = yaml.safe_load(value)
            if "." not in key:
                choices[key] = parsed
                if any(k.startswith(f"{key}.") for k in keys):
                    continue  # a config group (optim=adamw_constant beside optim.lr): a choice, its keys set below
            at = config
            *parents, leaf = key.split(".")
            for part in parents:
                at = at.setdefault(part, {})
            at[leaf] = parsed
        (job / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        (job / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"runtime": {"choices": choices}}}),
                                                   encoding="utf-8")
        jobs.append(job)
    return jobs


# The cpu sweeps of the claims `make reproduce-cpu` stopped running after its second ledger of
# 2026-12-04 (commit 417f0c8 still had them): tests of the cpu machinery that used these claims as
# their example give them back on a copy of the spec.
LAST_CPU = {
    "c07_domains.yaml": ('domains-multidomain-cpu-v5',
                         '["seed=2600,2601,2602,2603,2604,2605", "model.domain_split_layers=0,2", "model.d_head=16,32"]'),
    "c08_heads.yaml": ("lm-heads-cpu", '[optim=adamw_constant, optim.lr=0.003, "model.n_heads=2,4,8", '
                                       '"seed=2000,2001,2002,2003,2004,2005,2006,2007,2008,2009,2010,2011"]'),
    "c14_seeds.yaml": ("lm-schedule-cpu", '[optim.lr=0.003, "seed=2300,2301,2302,2303,2304,2305"]'),
    "c15_punctuation.yaml": ("heads-synthetic-cls-cpu-v4",
                             '["seed=' + ",".join(str(s) for s in range(1700, 1724)) + '", model.n_heads=8, model.pooling=cls]'),
    "c16_head_width.yaml": ("lm-heads-cpu", '[optim=adamw_constant, optim.lr=0.003, "model.n_heads=2,4,8", '
                                            '"seed=2000,2001,2002,2003,2004,2005,2006,2007,2008,2009,2010,2011"]'),
}


def with_last_cpu(name: str, text: str) -> str:
    """Spec `text` of shipped file `name` with its last cpu sweep put back (unchanged if it has one)."""
    if name not in LAST_CPU or "\n  cpu:" in text:
        return text
    sweep, overrides = LAST_CPU[name]
    block = f"  cpu:\n    sweep_name: {sweep}\n    overrides: {overrides}\n"
    head, full, tail = text.partition("\n  full:")
    assert full, f"{name} has no evidence.full to put the cpu sweep before"
    return head + "\n" + block.rstrip("\n") + full + tail


def shipped_with_last_cpu(specs: Path, name: str, out_dir: Path) -> Path:
    """The shipped spec `name` written to `out_dir` with its last cpu sweep put back."""
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / name
    out.write_text(with_last_cpu(name, (specs / name).read_text(encoding="utf-8")), encoding="utf-8")
    return out
