"""Every shell command in docs/*.md's code blocks runs as written, as the README's do (test_readme_commands).

A page's commands run in their order, in one scratch folder (a page's first command may make the
run a later one reads: docs/distill.md's teacher). Placeholders become real paths: `RUN_DIR`,
`RUN_A`, `logs/runs/<run>`, `logs/runs/a` a tiny run of the README's first training command,
`my.csv` / `mine.csv` a 1,000-row CSV (with a `domain` column). Training gets the README test's tiny
overrides; a sweep (-m) gets each sweeper parameter's first value, so it is one job. A command whose
comment says "refused" must exit 2. Left out, with the reason in SKIP: commands for a cluster or GPU,
for folders a user makes first (`my_conf/`, a model directory), and placeholders no run here fills.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.test_readme_commands import TRAIN_TINY, _run, scratch, sweep_firsts  # noqa: F401 - scratch: the fixture

pytestmark = pytest.mark.slow  # real commands, a few minutes per page

ROOT = Path(__file__).parents[2]
TRAINING = ("headlab-train", "headlab-distill")
SKIP = {  # a piece of the command -> why it is not run here
    "slurm": "needs a SLURM cluster", "accelerator=gpu": "needs GPUs", "my_conf": "needs the user's config folder",
    "/models/": "needs a model folder", "<stamp>": "a sweep folder's stamp", "<sweep folder>": "a sweep folder",
    "<name>": "a sweep folder", "SWEEP_DIR": "a sweep folder", "strategy=ddp": "2 processes: the README test runs one",
    "sweep=induction": "the LM sweep: tests/conf checks its grid", "experiment=induction": "3,000 LM steps",
    "logs/sweeps/smoke/x": "a sweep folder", "headlab-reproduce": "needs the claims' sweeps on disk (tests/reproduce)",
}
PLACEHOLDERS = ("logs/runs/<run>", "RUN_DIR", "RUN_A", "RUN_B", "logs/runs/a", "logs/runs/b")


def doc_commands(text: str) -> list[tuple[str, str]]:
    """(command, its comment) for each `headlab-*` line of the fenced code blocks (`\\` continuations joined)."""
    out, inside, pending = [], False, ""
    for line in text.splitlines():
        if line.startswith("```"):
            inside, pending = not inside, ""
            continue
        stripped = line.strip()
        if not inside or not (pending or re.match(r"^(\.venv/bin/)?headlab-[a-z-]+( |$)", stripped)):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        command, _, comment = (pending + stripped).partition(" #")
        out.append((" ".join(shlex.split(command)), comment.strip()))
        pending = ""
    return out


PAGES = {p.name: doc_commands(p.read_text(encoding="utf-8")) for p in sorted((ROOT / "docs").glob("*.md"))}
PAGES = {name: commands for name, commands in PAGES.items() if commands}


def _argv(command: str, run: Path) -> list[str]:
    for placeholder in PLACEHOLDERS:
        command = command.replace(placeholder, str(run))
    args = shlex.split(command)
    args[0] = str(Path(sys.executable).parent / Path(args[0]).name)
    if Path(args[0]).name in TRAINING:
        multirun = "-m" in args
        args = [re.sub(r"^([\w.]+)=([^,\[\]]+),[^\[\]]*$", r"\1=\2", a) if multirun and "=" in a else a for a in args]
        args += TRAIN_TINY
        if multirun:
            distill = Path(args[0]).name == "headlab-distill"  # composed as headlab-distill does: +distill=default
            train_args = ["+distill=default", *[a for a in args[1:] if not a.startswith("teacher=")], "teacher=x"] if distill else args[1:]
            args += sweep_firsts(train_args, args[1:])
            args = [a for a in args if a != "hydra/launcher=joblib"]  # one job: no pool of workers to start
    return args


@pytest.mark.parametrize("page", sorted(PAGES))
def test_doc_page_commands_run(page, scratch):
    tmp, env, run = scratch
    rows = ["text,label,domain"] + [f"{'good fine' if i % 2 else 'bad poor'} review {i},{i % 2},{'ab'[i % 3 % 2]}"
                                    for i in range(1000)]
    (tmp / "mine.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    failures = []
    for command, comment in PAGES[page]:
        if any(piece in command for piece in SKIP):
            continue
        argv = _argv(command, run)
        result = _run(argv, tmp, env)
        expected = 2 if "refused" in comment else 0
        if result.returncode != expected:
            failures.append(f"{shlex.join(argv)} -> exit {result.returncode} (expected {expected})\n{result.stderr[-1500:]}")
    assert not failures, "\n\n".join(failures)
