"""Issue 35's done-criterion as a user meets it: a CSV of your own with a planted rule, trained with
`data=files`, the run folder moved, then `headlab-report` and view.html name the head that does the job."""

from __future__ import annotations

import csv
import random
import shutil
from pathlib import Path

import pytest

from headlab.cli.report import main as report_main
from headlab.view import write_view
from headlab.store import RunDir
from tests._runs import compose_train_config, train_keeping_threads

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]  # two trainings, about 10 s each

LABELS = ("cat", "dog", "fox")
FILLER = "the a one is was very quite big small old new here there then so".split()


def write_planted(path: Path, where: str, n: int = 2000, seed: int = 0) -> Path:
    """`last`: the label is the last word, a colour word (a decoy) somewhere before it; `anywhere`: the
    label word sits at a random place among filler words."""
    rng = random.Random(seed)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(("text", "label"))
        for _ in range(n):
            label = rng.choice(LABELS)
            if where == "last":
                words = rng.sample(FILLER, rng.randint(3, 7))
                words.insert(rng.randrange(len(words) + 1), rng.choice(("red", "blue", "green")))
                words.append(label)
            else:
                words = [rng.choice(FILLER) for _ in range(rng.randint(5, 11))]
                words.insert(rng.randrange(len(words) + 1), label)
            out.writerow((" ".join(words), label))
    return path


@pytest.fixture(scope="module", params=["last", "anywhere"])
def moved_run(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"planted-{request.param}")
    data = write_planted(root / "my.csv", request.param)
    cfg = compose_train_config(root / "logs" / "run", [
        "data=files", f"data.files.train={data}", "data.tokenizer=word", "model.n_layers=1", "model.n_heads=2",
        "model.d_model=32", "trainer.max_epochs=4", "trainer.enable_progress_bar=false", "callbacks.progress_bar=null",
        "callbacks.head_metrics.figures=false", "test=false"])
    train_keeping_threads(cfg)
    (root / "moved").mkdir()
    return request.param, Path(shutil.move(root / "logs" / "run", root / "moved" / "run"))


def test_the_report_and_the_page_name_the_head_that_does_the_job(moved_run, tmp_path, monkeypatch, capsys):
    where, run = moved_run
    monkeypatch.chdir(tmp_path)  # another directory than the one it trained in
    assert report_main([str(run)]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert len(lines) == 2
    if where == "last":  # the head reads the last word from [CLS]; over all queries it is `mixed`
        assert any("from [CLS] attends the last token" in line and "role vertical (all queries: mixed)" in line
                   for line in lines), lines
    else:  # it picks the label words by content, wherever they are, and says which words
        reader = next(line for line in lines if "from [CLS] picks tokens by content" in line)
        named = reader.split("mostly ", 1)[1].split(" in 8 probe sentences", 1)[0]
        assert named.split(" (", 1)[0].strip("'") in LABELS, reader
    page = write_view(RunDir(run)).read_text(encoding="utf-8")
    assert all(line.strip() in page for line in lines)  # the page opens with the same lines
    assert '"role_label":"task role (from [CLS])"' in page  # and its grid shows the task roles
