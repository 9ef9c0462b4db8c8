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
