"""Every console script is a Hydra app a user drives the same way: `--help` names the command and
its keys, `--cfg job` prints the composed config, a misspelt key is one line with exit 2.

The entry points run in this process (as the console scripts call them, sys.argv and all): a
subprocess per call cost 3-10 s of imports each; one real console script per outcome is kept."""

from __future__ import annotations

import importlib
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
# A key each command's composed config must hold, and one override that misspells a nested key; a
# command not named here gets the generic checks below (its first key misspelt), so a new command
# needs no entry.
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
    "headlab-llc": ("llc", "llc.drawz=3", "key of llc (did you mean draws?)"),
}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HEADLAB_LOG_DIR": str(cwd / "logs")}
    return subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


@pytest.fixture
def call(tmp_path, monkeypatch, capsys):
    """`call(script, *args)`: the console script's entry point run in this process from tmp_path;
    returns (exit code, stdout, stderr)."""
    from hydra.core.global_hydra import GlobalHydra

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HEADLAB_LOG_DIR", str(tmp_path / "logs"))

    def _call(script: str, *args: str) -> tuple[int, str, str]:
        module, _, name = SCRIPTS[script].partition(":")
        entry = getattr(importlib.import_module(module), name)
        monkeypatch.setattr(sys, "argv", [script, *args])
        try:
            code = entry()
        except SystemExit as exited:
            code = exited.code
        finally:
            GlobalHydra.instance().clear()
        out = capsys.readouterr()
        return int(code or 0), out.out, out.err

    return _call


def _first_key(call, script: str) -> str:
    code, out, err = call(script, "--cfg", "job")
    assert code == 0, err[-500:]
    return next(iter(yaml.safe_load(out)))


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_misspelt_top_level_key_names_the_close_key(script, call):
    """Every console script, listed or not in EXPECTED: its first key misspelt, as set and as added
    (headlab-doctor reads keys it does not own as a headlab-train plan: its typo test is in EXPECTED)."""
    if script == "headlab-doctor":
        pytest.skip("a key headlab-doctor does not own is a headlab-train override (plan=[...])")
    key = _first_key(call, script)
    for override in (f"{key}x=1", f"+{key}x=1"):
        code, _, err = call(script, override)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and f"did you mean {key}?" in lines[0], (override, err[-800:])


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_help_and_cfg_job_and_a_misspelt_key(script, tmp_path, call):
    key, typo, close = EXPECTED[script]
    code, out, err = call(script, "--help")
    assert code == 0 and (script in out or "headlab-train" in out), err[-500:]
    code, out, err = call(script, "--cfg", "job")
    assert code == 0, err[-500:]
    assert key.split(".")[0] in yaml.safe_load(out)
    code, out, err = call(script, typo)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and close in lines[0], err[-800:]
    assert not any(tmp_path.iterdir()) or set(p.name for p in tmp_path.iterdir()) <= {"logs"}


@pytest.mark.parametrize("script", ["headlab-train", "headlab-importance"])
def test_the_installed_console_script_answers_the_same(script, tmp_path):
    """The real executables (their Python, their argv): a typo as one line with exit 2 (`--help` and the
    rest go through the same `main` in test_help_and_cfg_job_and_a_misspelt_key)."""
    key, typo, close = EXPECTED[script]
    wrong = run(script, typo, cwd=tmp_path)
    lines = wrong.stderr.strip().splitlines()
    assert wrong.returncode == 2 and len(lines) == 1 and close in lines[0], wrong.stderr[-800:]


ADDED = {  # a key added with `+` that the command does not know, and the key it is close to
    "headlab-train": ("+seeed=1", "seed"), "headlab-distill": ("+teachr=x", "teacher"),
    "headlab-aggregate": ("+figurs=false", "figures"), "headlab-importance": ("+checkpont=all", "checkpoint"),
    "headlab-prune": ("+prun=1", "prune"), "headlab-analyze-hf": ("+measur=1", "measure"),
    "headlab-doctor": ("+seeed=1", "seed"), "headlab-reproduce": ("+lanse=2", "lanes"), "headlab-view": ("+pth=x", "path"),
    "headlab-report": ("+pth=x", "path"),
}


@pytest.mark.parametrize("script", sorted(ADDED))
def test_a_key_added_with_plus_is_refused_naming_the_close_key(script, call):
    added, close = ADDED[script]
    code, _, err = call(script, added)  # on the parent commit: accepted silently (or another key's complaint)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err[-800:]
    assert f"invalid config {added[1:].split('=')[0]}=" in lines[0] and f"did you mean {close}?" in lines[0], lines


@pytest.mark.parametrize("script", ["headlab-reproduce", "headlab-view"])
def test_a_flag_no_command_knows_is_one_line_exit_2(call, script):
    """argparse's own report is the 8-line usage; `--evidence heads=DIR` (a spelling from before every
    command was a Hydra app) gets one line that says how settings are written."""
    code, out, err = call(script, "--evidence", "heads=/tmp/x")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"{script}: error: unrecognized arguments: --evidence (settings are key=value "
                                        f"overrides; `{script} --help` lists the keys)"]
