"""Every shell command in the README's code blocks runs as written and exits 0.

Each command is taken from the README itself, so a renamed key or a default that does not fit its
data fails here. Tiny overrides are appended where a command would train for minutes (a few steps,
few val/test batches; a sweep list shrunk to its first value), `<run>` becomes a run made by the
README's first training command, and `my.csv` a 1,000-row CSV as a user would have. Not run here:
`make demo` and `make test` (CI runs them) and `make reproduce*` (tens of minutes; the reproduce
runner has its own tests). Runs in a scratch folder with HEADLAB_LOG_DIR there: nothing lands in the repo.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # about a dozen real commands

ROOT = Path(__file__).parents[2]
SKIPPED = ("make demo", "make test", "make reproduce")
TRAIN_TINY = ["trainer.max_steps=3", "trainer.limit_val_batches=2", "trainer.limit_test_batches=2",
              "trainer.enable_progress_bar=false", "callbacks.progress_bar=null", "callbacks.head_metrics.figures=false"]


def sweep_firsts(args: list[str], given: list[str]) -> list[str]:
    """`key=first` for each sweeper parameter the config of `args` sweeps and the command line (`given`)
    does not set: command-line values win over a sweep's params, so the sweep is one job."""
    from headlab.config.app import compose_train

    cfg = compose_train([a for a in args if "=" in a and not a.startswith("-")], return_hydra_config=True)
    set_here = {a.split("=", 1)[0].lstrip("+~") for a in given if "=" in a}
    params = dict(cfg.hydra.sweeper.params or {})
    return [f"{key}={str(value).split(',')[0]}" for key, value in params.items() if key not in set_here]


def readme_commands(text: str) -> list[str]:
    """The shell lines of the README's fenced code blocks, comments stripped (`make ...` and `.venv/bin/...`)."""
    commands, inside = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
            continue
        if inside and (line.startswith(".venv/bin/") or line.startswith("make ")):
            commands.append(" ".join(shlex.split(line, comments=True)))
    return commands


COMMANDS = readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))


def tiny_for(args: list[str]) -> list[str]:
    """The TRAIN_TINY overrides whose key the config of `args` has: a language model's callbacks
    (experiment=induction) have no progress_bar or head_metrics entry to set."""
    from omegaconf import OmegaConf

    from headlab.config.app import compose_train

    cfg = compose_train([a for a in args if "=" in a and not a.startswith("-")])
    absent = object()
    return [o for o in TRAIN_TINY if OmegaConf.select(cfg, o.split("=", 1)[0], default=absent) is not absent]


def _argv(command: str, run: Path | None) -> list[str]:
    """The command as this test runs it: the venv's scripts, tiny overrides, the placeholders filled."""
    args = shlex.split(command.replace("logs/runs/<run>", str(run) if run else "<run>"))
    if args[0] == "make":  # make sweep: the venv exists already (-o: do not rebuild it), one tiny job through ARGS
        sweep = next(a.split("=", 1)[1] for a in args if a.startswith("SWEEP="))
        return ["make", "-o", ".venv/.installed", f"BIN={Path(sys.executable).parent}", *args[1:],
                f"ARGS={' '.join(TRAIN_TINY + sweep_firsts([f'sweep={sweep}'], []))}"]
    args[0] = str(Path(sys.executable).parent / Path(args[0]).name)
    if Path(args[0]).name == "headlab-train":
        multirun = "-m" in args
        args = [re.sub(r"^(seed)=([^,]+),.*$", r"\1=\2", a) if multirun else a for a in args]
        args += tiny_for(args[1:]) + (sweep_firsts(args[1:], args[1:]) if multirun else [])
    return args


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """A user's folder: my.csv (1,000 rows), and a run of the README's first training command."""
    tmp = tmp_path_factory.mktemp("readme")
    rows = ["text,label"] + [f"{'good fine great' if i % 2 else 'bad poor awful'} review number {i},{i % 2}" for i in range(1000)]
    (tmp / "my.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    env = {**os.environ, "HEADLAB_LOG_DIR": str(tmp / "logs"), "PYTHONUNBUFFERED": "1", "WANDB_MODE": "offline"}
    first = next(c for c in COMMANDS if c.startswith(".venv/bin/headlab-train"))
    result = _run(_argv(first, None), tmp, env)
    assert result.returncode == 0, result.stderr[-3000:]
    run = max((tmp / "logs" / "runs").iterdir())
    if any("logs/tiny-suite" in c for c in COMMANDS):  # the local suite docs/pretrained.md tells a user to build
        from headlab.lit.hf_lm import build_tiny_suite

        build_tiny_suite(tmp / "logs" / "tiny-suite", log=lambda line: None)
    return tmp, env, run


def test_readme_has_the_commands_it_documents():
    names = " ".join(COMMANDS)
    for name in ("headlab-train", "headlab-importance", "headlab-prune", "headlab-analyze-hf", "make sweep"):
        assert name in names


@pytest.mark.parametrize("command", [c for c in COMMANDS if not c.startswith(SKIPPED)])
def test_readme_command_runs(command, scratch):
    tmp, env, run = scratch
    argv = _argv(command, run)
    result = _run(argv, ROOT if argv[0] == "make" else tmp, env)
    assert result.returncode == 0, f"{shlex.join(argv)}\n{result.stderr[-3000:]}"
