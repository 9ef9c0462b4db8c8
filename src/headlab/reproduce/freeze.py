"""A freeze anyone can verify: rules committed before their data exist, and the record that shows it.

- Before a confirmatory start (`run=true` at scale cpu or full) every spec file it uses must be
  committed and unchanged in the working tree (`spec_history.spec_state`), and its git history must
  keep version discipline: a rule changed after an earlier version was committed carries a new
  `version` number, and the new version's confirmatory and replication seeds are seeds no earlier
  version listed. A refusal is one line naming the files, claims, versions and seeds; a job list
  (`jobs=true`, `dry_run=true`) only warns. The quick scale is exploratory and exempt.
- Before the runner starts a sweep (or run) it appends a start record to `reproduce-freeze.json`
  in the sweep folder (`<run_name>.freeze.json` beside a run): per claim the spec path, its sha256,
  the commit that last changed it and the one that froze its rule, the code commit, the UTC time.
- The report reads it back (`stamp`): per claim the commit that froze the rule, its time and the
  first job's start; a claim whose rule is newer than its first job is not decisive at a
  confirmatory scale (inconclusive, with the commit and times in the reason).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from headlab.errors import HeadlabError
from headlab.reproduce import spec_history as sh

FREEZE_FILE = "reproduce-freeze.json"
# the scales a freeze binds (quick is exploratory; suites reads models no rule here was written after)
CONFIRMATORY = ("cpu", "full", "suites")
CONFIRMATORY_EVIDENCE = (*CONFIRMATORY, "replication")  # the evidence a flagged rule makes not decisive
EARLIER_SEEDS = ("exploratory", "confirmatory", "replication")
FRESH_SEEDS = ("confirmatory", "replication")


class FreezeRefused(HeadlabError):
    """A confirmatory start whose rules cannot be shown to have been frozen first."""


# ---- before a start ------------------------------------------------------------------------------

def uncommitted_line(states: Iterable[sh.SpecState]) -> str:
    """One line naming the spec files that are not committed as they are, "" when all are."""
    bad = [s for s in states if not s.committed]
    if not bad:
        return ""
    if all(s.state == sh.OUTSIDE_GIT for s in bad):
        return (f"the claim specs in {bad[0].path.parent} are not in a git checkout, so their freeze cannot be verified: "
                "run a confirmatory scale from a clone of the repository with the specs committed (scale=quick is exempt)")
    return ("spec files not committed as they are in the working tree: "
            + ", ".join(f"{s.path.name} ({s.state})" for s in bad)
            + "; commit them (git add, git commit) before a confirmatory start")


def version_lines(claim: str, current: dict[str, Any], versions: list[sh.Version]) -> list[str]:
    """Version discipline of one spec (its working-tree YAML against its committed versions, newest
    first): the same version number with another rule, and fresh seeds an earlier version listed."""
    number = current.get("version")
    lines = []
    rule = sh.rule_of(current)
    changed = [v for v in versions if v.number == number and sh.rule_of(v.raw) != rule]
    if changed:
        lines.append(f"{claim}: version {number} rules differ from the committed version {number} of "
                     f"{', '.join(v.commit[:10] for v in changed)}; a changed rule needs a new version number")
    fresh = {int(s) for kind in FRESH_SEEDS for s in ((current.get("seeds") or {}).get(kind) or [])}
    earlier = [v for v in versions if isinstance(v.number, int) and isinstance(number, int) and v.number < number]
    reused: dict[int, set[int]] = {}
    for v in earlier:  # every commit of a version: what any of them listed was read
        if fresh & v.seeds(*EARLIER_SEEDS):
            reused.setdefault(v.number, set()).update(fresh & v.seeds(*EARLIER_SEEDS))
    reused = dict(sorted(reused.items()))
    if reused:
        numbers = ", ".join(map(str, reused))
        lines.append(f"{claim}: version {number} confirmatory/replication seeds {sorted(set().union(*reused.values()))} "
                     f"were listed by version{'s' if len(reused) > 1 else ''} {numbers}; a new version needs seeds no "
                     "earlier version read")
    return lines


def freeze_problems(specs: list) -> list[str]:
    """Every reason a confirmatory start with `specs` would not be frozen (one line each)."""
    states = [sh.spec_state(s.path) for s in specs]
    first = uncommitted_line(states)
    if first and all(s.state == sh.OUTSIDE_GIT for s in states if not s.committed):
        return [first]
    lines = [first] if first else []
    for spec, state in zip(specs, states):
        if state.state in (sh.COMMITTED, sh.MODIFIED):
            lines += version_lines(spec.claim, sh.read_raw(state.path), sh.history(state.path))
    return lines


def check_start(specs: list, scale: str, starts: bool, say: Callable[[str], None]) -> None:
    """Refuse (FreezeRefused, one line) a confirmatory start that is not frozen; a job list only
    warns through `say`. The quick scale is not checked."""
    if scale not in CONFIRMATORY:
        return
    problems = freeze_problems(specs)
    if not problems:
        return
    if starts:
        raise FreezeRefused(f"refusing a confirmatory start (scale={scale}): " + " | ".join(problems))
    for line in problems:
        say(f"# warning (a start at scale={scale} would be refused): {line}")


# ---- the record the runner writes ----------------------------------------------------------------

def freeze_entries(specs: list) -> dict[str, dict[str, Any]]:
    """Per claim what a start records: spec path, sha256, version, the commit that last changed the
    file and the one that froze its rule (with their times)."""
    entries = {}
    for spec in specs:
        state = sh.spec_state(spec.path)
        commit, committed_at = sh.rule_commit(state.path)
        entries[spec.claim] = {"spec": str(state.path), "sha256": state.sha256, "version": spec.version,
                               "state": state.state, "spec_commit": state.commit, "spec_committed_at": state.committed_at,
                               "rule_commit": commit, "rule_committed_at": committed_at}
    return entries


def record_start(path: Path, claims: Iterable[str], entries: Mapping[str, dict[str, Any]], scale: str) -> None:
    """Append this start (UTC time, code commit, the claims' entries) to the freeze file at `path`."""
    from headlab.store import atomic_write_json
    from headlab.store.run_info import code_commit

    record = read_record(path)
    record.setdefault("starts", []).append({
        "started_utc": utc_text(dt.datetime.now(dt.timezone.utc)), "scale": scale, "code_commit": code_commit(),
        "claims": {c: dict(entries[c]) for c in claims if c in entries}})
    atomic_write_json(path, record)


def run_freeze_file(run_dir: Path) -> Path:
    """Where the runner records the freeze of a run: beside its run dir (inside it, a file would make
    a fresh run look started)."""
    return run_dir.parent / f"{run_dir.name}.freeze.json"


def read_record(path: Path) -> dict[str, Any]:
    """The freeze file at `path` ({} when it is missing or unreadable: plain JSON, nothing runs)."""
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) and isinstance(loaded.get("starts", []), list) else {}


def utc_text(when: dt.datetime) -> str:
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> dt.datetime | None:
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


# ---- what the report reads -----------------------------------------------------------------------

def first_job(folder: Path, freeze_file: Path) -> tuple[dt.datetime | None, str]:
    """The earliest start of the evidence in `folder`, and where it was read: the runner's freeze
    record, else (and never later than) the jobs' first config segment or saved config, by file time."""
    candidates = []
    starts = [parse_time(s.get("started_utc", "")) for s in read_record(freeze_file).get("starts", []) if isinstance(s, dict)]
    if any(starts):
        candidates.append((min(s for s in starts if s), f"the runner's start record ({freeze_file.name})"))
    recorded = _job_files(folder)
    if recorded:
        earliest = min(p.stat().st_mtime for p in recorded)
        candidates.append((dt.datetime.fromtimestamp(earliest, dt.timezone.utc),
                           "the earliest file time of the jobs' first config segment or .hydra/config.yaml"))
    return min(candidates, key=lambda c: c[0]) if candidates else (None, "no job found")


def _job_files(folder: Path) -> list[Path]:
    """Each job's oldest start mark: segments/<first>/segment.json and .hydra/config.yaml (a job dir,
    or the job dirs of a sweep folder)."""
    from headlab.store import RunDir
    from headlab.store.run_dir import CONFIG_FILE, HYDRA_DIR, SEGMENT_INFO

    jobs = [p.parent.parent for p in folder.glob(f"*/{HYDRA_DIR}/{CONFIG_FILE}")]
    jobs += [folder] if (folder / HYDRA_DIR / CONFIG_FILE).is_file() else []
    files = []
    for job in jobs:
        run = RunDir(job)
        files.append(run.hydra_config_path)
        segments = run.segment_dirs()
        if segments and (segments[0] / SEGMENT_INFO).is_file():
            files.append(segments[0] / SEGMENT_INFO)
    return files


def stamp(result, scale: str, folder: Path | None = None, freeze_file: Path | None = None):
    """Give `result` its rule commit, first-job time and freeze flag; at a confirmatory scale a
    decisive verdict whose rule is newer than its first job becomes inconclusive, outside the Holm
    family (its tests are dropped: a rule chosen after the data gives no valid p)."""
    from headlab.reproduce.verdict import DECISIVE, INCONCLUSIVE

    commit, committed_at = sh.rule_commit(result.spec.path) if result.spec.path else ("", "")
    result.rule_commit, result.rule_committed_at = commit, committed_at
    if folder is None:
        return result
    start, where = first_job(folder, freeze_file or folder / FREEZE_FILE)
    if start is None:
        return result
    result.first_job = f"{utc_text(start)} ({where})"
    rule_time = parse_time(committed_at)
    if commit == "uncommitted" or (rule_time is not None and rule_time > start):
        shown = "not committed yet" if commit == "uncommitted" else f"commit {commit[:10]} at {utc_text(rule_time)}"
        result.freeze = f"rule newer than the first job ({shown}, first job {utc_text(start)})"
        if scale in CONFIRMATORY_EVIDENCE and result.verdict in DECISIVE:
            result.reason = (f"rule committed after its data were collected ({shown}, first job {utc_text(start)}): "
                             f"{result.verdict} by its interval, not decisive; {result.reason}")
            result.verdict, result.tests = INCONCLUSIVE, {}
            result.p_holm = math.nan
    return result
