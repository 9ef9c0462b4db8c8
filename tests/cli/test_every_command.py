"""Every console script is a Hydra app a user drives the same way: `--help` names the command and
its keys, `--cfg job` prints the composed config, a misspelt key is one line with exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
BIN = Path(sys.executable).parent
# A key each command's composed config must hold, and one override that misspells a key.
EXPECTED = {
    "headlab-train": ("seed", "model.n_head=3", "did you mean n_heads"),
    "headlab-distill": ("distill", "model.n_head=3", "headlab-distill: error: invalid config model.n_head=3"),
    "headlab-aggregate": ("figures", "figure=false", "figures"),
    "headlab-importance": ("importance", "importance.batchsize=3", "key of importance (did you mean batch_size?)"),
    "headlab-prune": ("prune", "prune.max_dorp=0.1", "key of prune (did you mean max_drop?)"),
    "headlab-analyze-hf": ("measure", "measure.map_lenn=8", "key of measure (did you mean map_len?)"),
    "headlab-doctor": ("plan", "optim.lrr=0.1", "did you mean lr"),
    "headlab-reproduce": ("scale", "lanse=2", "lanes"),
    "headlab-view": ("path", "pth=runs/a", "did you mean path"),
    "headlab-report": ("path", "pth=runs/a", "did you mean path"),
}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HEADLAB_LOG_DIR": str(cwd / "logs")}
    return subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def test_every_console_script_is_covered():
    assert set(EXPECTED) == set(SCRIPTS)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_help_and_cfg_job_and_a_misspelt_key(script, tmp_path):
    key, typo, close = EXPECTED[script]
    helped = run(script, "--help", cwd=tmp_path)
    assert helped.returncode == 0 and (script in helped.stdout or "headlab-train" in helped.stdout), helped.stderr[-500:]
    job = run(script, "--cfg", "job", cwd=tmp_path)
    assert job.returncode == 0, job.stderr[-500:]
    assert key.split(".")[0] in yaml.safe_load(job.stdout)
    wrong = run(script, typo, cwd=tmp_path)
    lines = wrong.stderr.strip().splitlines()
    assert wrong.returncode == 2 and len(lines) == 1 and close in lines[0], wrong.stderr[-800:]
    assert not any(tmp_path.iterdir()) or set(p.name for p in tmp_path.iterdir()) <= {"logs"}


ADDED = {  # a key added with `+` that the command does not know, and the key it is close to
    "headlab-train": ("+seeed=1", "seed"), "headlab-distill": ("+teachr=x", "teacher"),
    "headlab-aggregate": ("+figurs=false", "figures"), "headlab-importance": ("+checkpont=all", "checkpoint"),
    "headlab-prune": ("+prun=1", "prune"), "headlab-analyze-hf": ("+measur=1", "measure"),
    "headlab-doctor": ("+seeed=1", "seed"), "headlab-reproduce": ("+lanse=2", "lanes"), "headlab-view": ("+pth=x", "path"),
    "headlab-report": ("+pth=x", "path"),
}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_key_added_with_plus_is_refused_naming_the_close_key(script, tmp_path):
    added, close = ADDED[script]
    wrong = run(script, added, cwd=tmp_path)  # on the parent commit: accepted silently (or another key's complaint)
    lines = wrong.stderr.strip().splitlines()
    assert wrong.returncode == 2 and len(lines) == 1, wrong.stderr[-800:]
    assert f"invalid config {added[1:].split('=')[0]}=" in lines[0] and f"did you mean {close}?" in lines[0], lines
