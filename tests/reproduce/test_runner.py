"""The runner of `headlab-reproduce run=true`: what it starts, in which order, and what a second call
redoes. Stand-in console scripts record every call and write what the real ones would (job dirs with
summary.json and .hydra/, an aggregate table, importance output), so the test is about the runner's
decisions, not training."""

from __future__ import annotations

import json
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from headlab.errors import ConfigError
from headlab.reproduce.jobs import sweep_jobs
from headlab.reproduce.runner import FOLDER, STEPS_FILE, Runner, run_plan
from headlab.reproduce.spec import load_spec

# A multirun stand-in: the grid is seed=0,1 x model.n_heads=4,8 (4 jobs); a job dir that already
# holds a completed summary is left alone, as resume=auto does. FAIL_JOB makes one job fail.
TRAIN = """
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
import time
log = Path(os.environ["CALLS"]); log.open("a").write(json.dumps([Path(sys.argv[0]).name, *args]) + "\\n")
times = os.environ.get("TIMES")
if times:
    Path(times).open("a").write(json.dumps(["start", next(a for a in args if a.startswith("sweep_name=")), time.monotonic()]) + "\\n")
    time.sleep(0.5)
    Path(times).open("a").write(json.dumps(["end", next(a for a in args if a.startswith("sweep_name=")), time.monotonic()]) + "\\n")
folder = Path(next(a.split("=", 1)[1] for a in args if a.startswith("hydra.sweep.dir=")))
folder.mkdir(parents=True, exist_ok=True)
bad = False
for num, (seed, heads) in enumerate([(0, 4), (0, 8), (1, 4), (1, 8)]):
    job = folder / str(num)
    summary = job / "summary.json"
    if summary.is_file() and json.loads(summary.read_text())["status"] == "completed":
        continue
    (job / ".hydra").mkdir(parents=True, exist_ok=True)
    (job / ".hydra" / "config.yaml").write_text(f"seed: {seed}\\nmodel:\\n  n_heads: {heads}\\n")
    failed = os.environ.get("FAIL_JOB") == str(num)
    bad = bad or failed
    summary.write_text(json.dumps({"status": "failed" if failed else "completed"}))
sys.exit(1 if bad else 0)
"""
TOOL = """
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
Path(os.environ["CALLS"]).open("a").write(json.dumps([Path(sys.argv[0]).name, *args]) + "\\n")
target = Path(args[0])
if Path(sys.argv[0]).name == "headlab-aggregate":
    (target / "aggregate").mkdir(exist_ok=True)
    (target / "aggregate" / "sweep_runs.csv").write_text("job\\n")
elif os.environ.get("FAIL_TOOL") == target.name:
    sys.exit(2)
else:
    (target / "head_importance.parquet").write_text("x")
"""


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("headlab-train", TRAIN), ("headlab-distill", TRAIN), ("headlab-aggregate", TOOL),
                       ("headlab-importance", TOOL), ("headlab-prune", TOOL)):
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\n{textwrap.dedent(body)}")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CALLS", str(tmp_path / "calls.jsonl"))
    return bin_dir


def _calls(tmp_path: Path) -> list[list[str]]:
    path = tmp_path / "calls.jsonl"
    calls = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    path.unlink(missing_ok=True)
    return calls


SPEC = """
claim: C{n}
version: 1
title: t
section: "1"
article: {{zh: 字, en: word}}
evidence:
  sweep: {sweep}
  {program}
  quick: {{sweep_name: {name}, overrides: ["seed=0,1", "model.n_heads=4,8"]{teacher}}}
  full: {{sweep_name: {name}-full, overrides: ["seed=0,1,2,3,4"]}}
  {per_job}
  table: sweep_runs.csv
statistics:
  x: {{kind: mean, column: test_acc}}
rule: {{supported_if: "x.mean > 0.5", contradicted_if: "x.mean < 0.5"}}
"""


def _specs(tmp_path: Path):
    texts = {
        "c02_student.yaml": SPEC.format(n=2, sweep="distill", program="program: distill", name="students",
                                        teacher=", teacher: {sweep_name: teachers, where: {model.n_heads: 8, seed: 0}}",
                                        per_job=""),
        "c01_teacher.yaml": SPEC.format(n=1, sweep="heads", program="", name="teachers", teacher="",
                                        per_job="per_job: [{command: headlab-importance, args: [importance.curves=false], "
                                                "where: {model.n_heads: 4}}]"),
    }
    specs = []
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        specs.append(load_spec(tmp_path / name))
    return specs


def test_teachers_run_first_per_job_commands_run_once_and_a_second_call_redoes_nothing(tmp_path, fake_bin):
    root = tmp_path / "sweeps"
    runner = Runner(root, tmp_path / "runs", "quick", "joblib", lanes=2, bin_dir=fake_bin, say=lambda _: None)
    jobs = sweep_jobs(_specs(tmp_path), "quick")
    assert [j.sweep_name for j in jobs] == ["teachers", "students"]  # spec order says students first
    folders = run_plan(runner, jobs, [])
    calls = _calls(tmp_path)
    teachers, students = root / "teachers" / FOLDER, root / "students" / FOLDER
    assert folders == {"teachers": teachers, "students": students}
    assert [c[0] for c in calls] == ["headlab-train", "headlab-importance", "headlab-importance", "headlab-aggregate",
                                     "headlab-distill", "headlab-aggregate"]
    assert "resume=auto" in calls[0] and f"hydra.sweep.dir={teachers}" in calls[0] and "hydra.launcher.n_jobs=1" in calls[0]
    assert sorted(c[1] for c in calls[1:3]) == [str(teachers / "0"), str(teachers / "2")]  # the 4-head jobs only
    threads = runner.threads()
    assert calls[1][2:] == ["importance.curves=false", f"importance.threads={threads}"] and f"threads={threads}" in calls[0]
    assert f"teacher={teachers / '1'}" in calls[4]  # 8 heads, seed 0
    assert json.loads((teachers / "0" / STEPS_FILE).read_text()).keys() == {"headlab-importance importance.curves=false"}
    assert [r.status for r in runner.results] == ["done", "done"]

    again = Runner(root, tmp_path / "runs", "quick", "joblib", lanes=2, bin_dir=fake_bin, say=lambda _: None)
    run_plan(again, jobs, [])
    calls = _calls(tmp_path)
    assert [c[0] for c in calls] == ["headlab-train", "headlab-distill"]  # launched, every job skipped; no re-aggregation
    assert [r.status for r in again.results] == ["skipped", "skipped"]


def test_failures_are_reported_and_retried_by_the_next_call(tmp_path, fake_bin, monkeypatch):
    root = tmp_path / "sweeps"
    jobs = sweep_jobs(_specs(tmp_path), "quick")
    monkeypatch.setenv("FAIL_JOB", "1")      # the teacher job itself fails
    monkeypatch.setenv("FAIL_TOOL", "2")     # and importance on job 2
    runner = Runner(root, tmp_path / "runs", "quick", "joblib", bin_dir=fake_bin, say=lambda _: None)
    run_plan(runner, jobs, [])
    assert [r.status for r in runner.results] == ["failed", "failed"]
    assert "some jobs failed" in runner.results[0].detail and "1 per-job commands failed" in runner.results[0].detail
    assert "no completed teacher job in teachers with model.n_heads=8, seed=0" in runner.results[1].detail
    assert "headlab-distill" not in [c[0] for c in _calls(tmp_path)]
    assert not (root / "teachers" / FOLDER / "2" / STEPS_FILE).exists()

    monkeypatch.delenv("FAIL_JOB")
    monkeypatch.delenv("FAIL_TOOL")
    (root / "teachers" / FOLDER / "1" / "summary.json").unlink()  # what resume=auto would retrain
    again = Runner(root, tmp_path / "runs", "quick", "joblib", bin_dir=fake_bin, say=lambda _: None)
    run_plan(again, jobs, [])
    calls = _calls(tmp_path)
    assert [c[1] for c in calls if c[0] == "headlab-importance"] == [str(root / "teachers" / FOLDER / "2")]
    assert [r.status for r in again.results] == ["done", "done"]


def test_students_alone_read_a_teacher_sweep_run_before_and_an_unknown_teacher_is_refused(tmp_path, fake_bin):
    """`only=` the student claim: its teacher's sweep (another claim's, run before) is read from its folder,
    never trained again; a teacher sweep no claim runs is a ConfigError before anything starts."""
    root = tmp_path / "sweeps"
    specs = _specs(tmp_path)
    run_plan(Runner(root, tmp_path / "runs", "quick", "joblib", bin_dir=fake_bin, say=lambda _: None),
             sweep_jobs(specs[1:], "quick"), [])  # the teacher claim's sweep, on its own
    _calls(tmp_path)
    students = sweep_jobs(specs[:1], "quick", elsewhere=frozenset({"teachers"}))
    assert [j.sweep_name for j in students] == ["students"]
    runner = Runner(root, tmp_path / "runs", "quick", "joblib", bin_dir=fake_bin, say=lambda _: None)
    run_plan(runner, students, [])
    calls = _calls(tmp_path)
    assert [c[0] for c in calls] == ["headlab-distill", "headlab-aggregate"]  # no headlab-train: nothing retrained
    assert f"teacher={root / 'teachers' / FOLDER / '1'}" in calls[0] and [r.status for r in runner.results] == ["done"]
    with pytest.raises(ConfigError, match="teacher.sweep_name='teachers': expected a sweep of this scale"):
        sweep_jobs(specs[:1], "quick")


def test_a_dry_run_prints_every_command_and_touches_nothing(tmp_path, fake_bin):
    lines: list[str] = []
    runner = Runner(tmp_path / "sweeps", tmp_path / "runs", "full", "slurm", dry_run=True, bin_dir=fake_bin,
                    say=lines.append, extra=("trainer.accelerator=gpu",))
    run_plan(runner, sweep_jobs(_specs(tmp_path), "full"), [])
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "calls.jsonl").exists()
    teachers = lines.index(next(line for line in lines if "sweep_name=teachers-full" in line))
    assert lines[teachers].endswith("sweep_name=teachers-full trainer.accelerator=gpu")
    assert "hydra/launcher=slurm" in lines[teachers] and "hydra.launcher.n_jobs" not in lines[teachers]
    assert lines[teachers + 1] == ("  then on each completed job with model.n_heads=4: "
                                   "headlab-importance JOB_DIR importance.curves=false")


def test_a_teacher_sweep_that_no_spec_runs_is_refused(tmp_path):
    student = _specs(tmp_path)[0]
    with pytest.raises(ConfigError, match=r"C2: evidence\.quick\.teacher\.sweep_name='teachers'"):
        sweep_jobs([student], "quick")


def test_lanes_run_independent_sweeps_side_by_side_and_a_student_after_its_teacher(tmp_path, fake_bin, monkeypatch):
    monkeypatch.setenv("TIMES", str(tmp_path / "times.jsonl"))
    specs = _specs(tmp_path)
    (tmp_path / "c03_other.yaml").write_text(SPEC.format(n=3, sweep="heads", program="", name="other", teacher="",
                                                         per_job=""), encoding="utf-8")
    specs.append(load_spec(tmp_path / "c03_other.yaml"))
    runner = Runner(tmp_path / "sweeps", tmp_path / "runs", "quick", "joblib", lanes=2, bin_dir=fake_bin, say=lambda _: None)
    run_plan(runner, sweep_jobs(specs, "quick"), [])
    events = {(kind, arg.split("=")[-1]): t for kind, arg, t in
              (json.loads(line) for line in (tmp_path / "times.jsonl").read_text().splitlines())}
    assert events["start", "other"] < events["end", "teachers"]       # side by side
    assert events["start", "students"] > events["end", "teachers"]    # waits for its teacher
    assert sorted(r.step for r in runner.results) == ["sweep other", "sweep students", "sweep teachers"]


@pytest.mark.parametrize("needed", [True, False])
def test_a_deferred_sweep_starts_after_the_sweeps_it_waits_for_and_only_if_still_needed(tmp_path, fake_bin, monkeypatch,
                                                                                         needed):
    from headlab.reproduce.runner import Deferred

    monkeypatch.setenv("TIMES", str(tmp_path / "times.jsonl"))
    specs = _specs(tmp_path)
    (tmp_path / "c03_other.yaml").write_text(SPEC.format(n=3, sweep="heads", program="", name="other", teacher="",
                                                         per_job=""), encoding="utf-8")
    other = sweep_jobs([load_spec(tmp_path / "c03_other.yaml")], "quick")[0]
    asked = []
    later = Deferred(other, ("teachers",), lambda: asked.append("asked") or needed)
    runner = Runner(tmp_path / "sweeps", tmp_path / "runs", "quick", "joblib", lanes=2, bin_dir=fake_bin, say=lambda _: None)
    folders = run_plan(runner, sweep_jobs(specs, "quick"), [], [later])
    events = {(kind, arg.split("=")[-1]): t for kind, arg, t in
              (json.loads(line) for line in (tmp_path / "times.jsonl").read_text().splitlines())}
    assert asked == ["asked"]  # asked once, when a lane took it
    if needed:  # starts after the sweep it waits for, beside the student that waits for the same one
        assert events["start", "other"] > events["end", "teachers"] and "other" in folders
        assert events["start", "other"] < events["end", "students"]
    else:
        assert ("start", "other") not in events and "other" not in folders
        assert next(r for r in runner.results if r.step == "sweep other").status == "skipped"
