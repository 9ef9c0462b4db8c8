"""A freeze anyone can verify (issue 31, item 4), in a throwaway git repository: a confirmatory start
refuses uncommitted specs and broken version discipline, the runner records each spec's freeze before
its jobs start, and a rule committed after its first job is not decisive."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from headlab.reproduce.evidence import evaluate_claim
from headlab.reproduce.freeze import FREEZE_FILE, FreezeRefused, check_start, freeze_entries, freeze_problems, stamp
from headlab.reproduce.jobs import sweep_jobs
from headlab.reproduce.multiplicity import control
from headlab.reproduce.report import claims_table, write_report
from headlab.reproduce.runner import FOLDER, Runner
from headlab.reproduce.spec import load_spec
from headlab.reproduce.verdict import INCONCLUSIVE, SUPPORTED, ClaimResult
from tests.reproduce.recorded import record_jobs, with_last_cpu
from tests.reproduce.test_verdicts import SPECS, heads_runs

C8 = "c08_heads.yaml"


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """An empty git repository with an author, no user or system configuration."""
    for key, value in (("GIT_AUTHOR_NAME", "t"), ("GIT_AUTHOR_EMAIL", "t@t"), ("GIT_COMMITTER_NAME", "t"),
                       ("GIT_COMMITTER_EMAIL", "t@t"), ("GIT_CONFIG_GLOBAL", "/dev/null"), ("GIT_CONFIG_NOSYSTEM", "1")):
        monkeypatch.setenv(key, value)
    root = tmp_path / "repo"
    (root / "specs").mkdir(parents=True)
    _git(root, "init", "-q")
    return root


def _git(root: Path, *args: str, when: str | None = None) -> str:
    env = None
    if when is not None:
        import os

        env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    done = subprocess.run(["git", "-C", str(root), "-c", "commit.gpgsign=false", *args], capture_output=True, text=True,
                          check=True, env=env)
    return done.stdout.strip()


def _commit(root: Path, text: str, when: str = "2026-01-01T00:00:00+00:00", name: str = C8) -> Path:
    path = root / "specs" / name
    path.write_text(text, encoding="utf-8")
    _git(root, "add", "--", str(path))
    _git(root, "commit", "-q", "-m", f"spec {name}", when=when)
    return path


def _c8(version: int = 3, margin: str = "0.015", confirmatory: str = "[10, 11, 12, 13, 14, 15, 16, 17]") -> str:
    """The shipped C8 spec (with its last cpu sweep) with its version, margin and seeds replaced
    (exploratory [0, 1, 2]), whatever version and seeds it ships with now."""
    text = with_last_cpu(C8, (SPECS / C8).read_text(encoding="utf-8"))
    text = re.sub(r"^version: \d+$", f"version: {version}", text, count=1, flags=re.M).replace("value: 0.015", f"value: {margin}", 1)
    text = re.sub(r"^  exploratory: \[.*$", "  exploratory: [0, 1, 2]", text, count=1, flags=re.M)
    return re.sub(r"^  confirmatory: \[.*$", f"  confirmatory: {confirmatory}", text, count=1, flags=re.M)


def test_a_confirmatory_start_refuses_modified_and_untracked_specs_and_accepts_committed_ones(repo):
    path = _commit(repo, _c8())
    spec = load_spec(path)
    check_start([spec], "cpu", True, print)  # committed and unchanged: accepted
    path.write_text(_c8() + "# an edit\n", encoding="utf-8")
    with pytest.raises(FreezeRefused, match=rf"scale=cpu.*{C8} \(modified\)"):
        check_start([spec], "cpu", True, print)
    _git(repo, "add", "--", str(path))  # staged is not committed either
    with pytest.raises(FreezeRefused, match=rf"{C8} \(modified\)"):
        check_start([spec], "full", True, print)
    other = repo / "specs" / "c16_head_width.yaml"
    other.write_text((SPECS / other.name).read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(FreezeRefused) as refused:
        check_start([spec, load_spec(other)], "cpu", True, print)
    assert "c16_head_width.yaml (untracked)" in str(refused.value) and "\n" not in str(refused.value)
    check_start([spec, load_spec(other)], "quick", True, print)  # exploratory: exempt
    said = []
    check_start([spec, load_spec(other)], "cpu", False, said.append)  # a job list only warns
    assert len(said) == 1 and "c16_head_width.yaml (untracked)" in said[0] and said[0].startswith("# warning")


def test_outside_a_git_checkout_a_confirmatory_start_is_refused_with_what_to_do(tmp_path):
    path = tmp_path / C8
    path.write_text(_c8(), encoding="utf-8")
    with pytest.raises(FreezeRefused, match="not in a git checkout.*clone of the repository"):
        check_start([load_spec(path)], "cpu", True, print)


def test_the_command_refuses_a_confirmatory_run_in_one_line_naming_the_file(repo, tmp_path, capsys):
    from headlab.cli.reproduce import main

    _commit(repo, _c8())
    (repo / "specs" / C8).write_text(_c8(margin="0.01"), encoding="utf-8")
    code = main(["run=true", "scale=cpu", f"specs={repo / 'specs'}", f"sweeps_root={tmp_path / 'sweeps'}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and f"{C8} (modified)" in err, err
    assert not (tmp_path / "sweeps").exists()  # nothing started


def test_a_changed_rule_under_the_same_version_is_refused(repo):
    _commit(repo, _c8(), when="2026-01-01T00:00:00+00:00")
    path = _commit(repo, _c8(margin="0.01"), when="2026-01-02T00:00:00+00:00")
    problems = freeze_problems([load_spec(path)])
    assert len(problems) == 1 and problems[0].startswith("C8: version 3 rules differ from the committed version 3 of")
    # a wording change of the margin's reason is not a rule change
    _commit(repo, _c8(margin="0.01").replace("at least 1.5 points", "at least 1 point"), when="2026-01-03T00:00:00+00:00")
    _commit(repo, _c8(version=4, margin="0.01", confirmatory="[20, 21]"), when="2026-01-04T00:00:00+00:00")
    assert freeze_problems([load_spec(path)]) == []


def test_a_new_version_must_not_reuse_seeds_an_earlier_version_listed(repo):
    _commit(repo, _c8(), when="2026-01-01T00:00:00+00:00")  # version 3: exploratory 0-2, confirmatory 10-17
    path = _commit(repo, _c8(version=4, margin="0.01", confirmatory="[17, 20]"), when="2026-01-02T00:00:00+00:00")
    with pytest.raises(FreezeRefused) as refused:
        check_start([load_spec(path)], "cpu", True, print)
    assert "C8: version 4 confirmatory/replication seeds [17] were listed by version 3" in str(refused.value)
    # an earlier version's exploratory seeds were read too; one line names every version that read them
    _commit(repo, _c8(version=4, margin="0.01", confirmatory="[40, 41]"), when="2026-01-03T00:00:00+00:00")
    moved = _c8(version=5, margin="0.02", confirmatory="[1, 41]").replace("exploratory: [0, 1, 2]", "exploratory: [30]")
    _commit(repo, moved, when="2026-01-04T00:00:00+00:00")
    assert freeze_problems([load_spec(path)]) == [
        "C8: version 5 confirmatory/replication seeds [1, 41] were listed by versions 3, 4; a new version needs seeds "
        "no earlier version read"]


def test_the_runner_records_each_specs_freeze_before_its_jobs_start(repo, tmp_path):
    """The stand-in multirun copies the freeze file it finds when it first starts: the record exists first."""
    path = _commit(repo, _c8(), when="2026-01-01T00:00:00+00:00")
    spec = load_spec(path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    train = bin_dir / "headlab-train"
    train.write_text(f"#!{sys.executable}\nimport shutil, sys\nfrom pathlib import Path\n"
                     "folder = Path(next(a.split('=', 1)[1] for a in sys.argv if a.startswith('hydra.sweep.dir=')))\n"
                     "seen = folder / 'seen-at-start.json'\n"
                     f"seen.exists() or shutil.copyfile(folder / {FREEZE_FILE!r}, seen)\n")
    (bin_dir / "headlab-aggregate").write_text("#!/bin/sh\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    runner = Runner(tmp_path / "sweeps", tmp_path / "runs", "cpu", "basic", lanes=1, bin_dir=bin_dir, say=lambda _: None)
    runner.freeze = freeze_entries([spec])
    job = sweep_jobs([spec], "cpu")[0]
    runner.run_sweep(job)
    runner.run_sweep(job)  # a second start is appended, the first kept
    folder = tmp_path / "sweeps" / spec.sweep_name("cpu") / FOLDER
    seen = json.loads((folder / "seen-at-start.json").read_text())
    record = json.loads((folder / FREEZE_FILE).read_text())
    assert len(seen["starts"]) == 1 and len(record["starts"]) == 2
    import hashlib

    head = _git(repo, "rev-parse", "HEAD")
    entry = seen["starts"][0]["claims"]["C8"]
    assert entry["spec"] == str(path.resolve()) and entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert entry["spec_commit"] == entry["rule_commit"] == head and entry["version"] == 3
    assert entry["spec_committed_at"].startswith("2026-01-01T00:00:00") and entry["state"] == "committed"
    start = seen["starts"][0]
    assert start["scale"] == "cpu" and start["started_utc"].endswith("Z") and start["code_commit"]


def _cpu_evidence(root: Path, spec, started_utc: str) -> Path:
    """A cpu-scale C8 sweep that supports the claim (3 points [2.75, 3.25]), started at `started_utc`."""
    folder = root / spec.sweep_name("cpu") / FOLDER
    (folder / "aggregate").mkdir(parents=True)
    record_jobs(folder, spec, "cpu")
    heads_runs([0.86, 0.86, 0.87], [0.83, 0.829, 0.841]).to_csv(folder / "aggregate" / "sweep_runs.csv", index=False)
    (folder / FREEZE_FILE).write_text(json.dumps({"starts": [{"started_utc": started_utc, "claims": {}}]}))
    return folder


def test_a_rule_committed_after_its_first_job_is_not_decisive(repo, tmp_path):
    path = _commit(repo, _c8(), when="2026-01-01T12:00:00+00:00")
    spec = load_spec(path)
    folder = _cpu_evidence(tmp_path / "sweeps", spec, "2026-01-01T10:00:00Z")
    result = control([evaluate_claim(spec, tmp_path / "sweeps", scale="cpu")])[0]
    head = _git(repo, "rev-parse", "HEAD")
    assert result.verdict == INCONCLUSIVE and not result.tests, result.reason
    assert result.reason.startswith(f"rule committed after its data were collected (commit {head[:10]} at "
                                    "2026-01-01T12:00:00Z, first job 2026-01-01T10:00:00Z): supported by its interval")
    row = claims_table([result]).iloc[0]
    assert row["rule_commit"] == head and row["rule_committed_at"].startswith("2026-01-01T12:00:00")
    assert row["first_job"].startswith("2026-01-01T10:00:00Z (the runner's start record") and "newer" in row["freeze"]
    written = write_report([result], tmp_path / "report")
    shown = f"freeze: rule commit {head[:10]} (2026-01-01T12:00:00+00:00); first job 2026-01-01T10:00:00Z"
    for page in (tmp_path / "report" / "claims.md", tmp_path / "report" / "index.html"):
        assert page in written and shown in page.read_text(encoding="utf-8")
        assert "usable) (rule newer than its first job)" in page.read_text(encoding="utf-8")  # the summary row's mark
    # at the exploratory scale the same flag leaves the verdict as it is
    quick = stamp(ClaimResult(spec, SUPPORTED, "beyond", tests={"above": 0.001}), "quick", folder)
    assert quick.verdict == SUPPORTED and quick.tests and "newer" in quick.freeze


def test_a_rule_committed_before_its_first_job_stays_decisive(repo, tmp_path):
    path = _commit(repo, _c8(), when="2026-01-01T09:00:00+00:00")
    spec = load_spec(path)
    _cpu_evidence(tmp_path / "sweeps", spec, "2026-01-01T10:00:00Z")
    result = control([evaluate_claim(spec, tmp_path / "sweeps", scale="cpu")])[0]
    assert result.verdict == SUPPORTED and result.freeze == "", result.reason
    assert result.first_job.startswith("2026-01-01T10:00:00Z")


def test_without_a_start_record_the_first_job_is_the_earliest_job_file_time(repo, tmp_path):
    """A rule committed in the future of the jobs' files (here: 2030) is newer than their first job."""
    path = _commit(repo, _c8(), when="2030-01-01T00:00:00+00:00")
    spec = load_spec(path)
    folder = _cpu_evidence(tmp_path / "sweeps", spec, "")
    (folder / FREEZE_FILE).unlink()
    result = evaluate_claim(spec, tmp_path / "sweeps", scale="cpu")
    assert "file time" in result.first_job and result.verdict == INCONCLUSIVE, result.reason
    assert "rule committed after its data were collected" in result.reason


def test_a_run_records_its_freeze_beside_its_run_dir_and_an_uncommitted_rule_is_flagged(repo, tmp_path):
    from headlab.reproduce.jobs import RunJob
    from headlab.reproduce.freeze import run_freeze_file

    path = _commit(repo, _c8())
    spec = load_spec(path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "headlab-analyze-hf").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "headlab-analyze-hf").chmod(0o755)
    runner = Runner(tmp_path / "sweeps", tmp_path / "runs", "cpu", "basic", lanes=1, bin_dir=bin_dir, say=lambda _: None)
    runner.freeze = freeze_entries([spec])
    runner.run_one(RunJob("headlab-analyze-hf", "c8-run", (), ("C8",)))
    record = json.loads(run_freeze_file(tmp_path / "runs" / "c8-run").read_text())
    assert record["starts"][0]["claims"]["C8"]["rule_commit"] == _git(repo, "rev-parse", "HEAD")
    assert not (tmp_path / "runs" / "c8-run").exists()  # nothing inside the run dir before the run starts
    # a rule edited in the working tree is committed by no commit: newer than any job
    path.write_text(_c8(margin="0.01"), encoding="utf-8")
    folder = _cpu_evidence(tmp_path / "sweeps", load_spec(path), "2026-01-01T10:00:00Z")
    flagged = stamp(ClaimResult(load_spec(path), SUPPORTED, "beyond", tests={"above": 0.001}), "cpu", folder)
    assert flagged.rule_commit == "uncommitted" and flagged.verdict == INCONCLUSIVE and not flagged.tests
    assert flagged.reason.startswith("rule committed after its data were collected (not committed yet, first job "
                                     "2026-01-01T10:00:00Z)")
