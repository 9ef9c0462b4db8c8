"""What git says about a claim spec file: whether the working tree holds a committed version, its
content hash, its committed versions, and the commit that froze its current rule.

A freeze anyone can verify rests on these facts only (issue 31, item 4): a rule is frozen by a
commit, and git's history of the spec file shows which versions existed and what each ruled. The
history is read as plain YAML (`git show H:file`), not through the spec loader: an old version
need not pass today's schema to show its rule and seeds.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# what a spec's verdict rule is: the keys that decide (a margin's or prerequisite's `reason` is its
# wording, which may be corrected without changing what is decided)
RULE_KEYS = ("rule", "primary", "margin", "prerequisite", "statistics")
WORDING_KEYS = ("reason",)
COMMITTED, MODIFIED, UNTRACKED, OUTSIDE_GIT = "committed", "modified", "untracked", "outside git"


@dataclass(frozen=True)
class SpecState:
    """A spec file as git sees it: `state` one of committed, modified, untracked, outside git;
    `commit` / `committed_at` of the last commit that changed it ("" when none)."""

    path: Path
    sha256: str
    state: str
    commit: str = ""
    committed_at: str = ""

    @property
    def committed(self) -> bool:
        return self.state == COMMITTED


@dataclass(frozen=True)
class Version:
    """One committed version of a spec file: the commit, its time (ISO, with offset) and the YAML it held."""

    commit: str
    committed_at: str
    raw: dict[str, Any]

    @property
    def number(self) -> int | None:
        value = self.raw.get("version")
        return value if isinstance(value, int) else None

    def seeds(self, *kinds: str) -> set[int]:
        seeds = self.raw.get("seeds") or {}
        return {int(s) for kind in kinds for s in (seeds.get(kind) or []) if isinstance(s, int)}


def git(folder: Path, *args: str) -> subprocess.CompletedProcess | None:
    """`git -C folder args`, None when git cannot be run at all."""
    try:
        return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None


def toplevel(path: Path) -> Path | None:
    """The root of the git checkout holding `path`, None outside one."""
    found = git(path.parent, "rev-parse", "--show-toplevel")
    return Path(found.stdout.strip()) if found is not None and found.returncode == 0 and found.stdout.strip() else None


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def spec_state(path: str | Path) -> SpecState:
    """Whether the working tree's spec file is the committed one (tracked and unchanged since HEAD)."""
    path = Path(path).resolve()
    digest = sha256_of(path)
    if toplevel(path) is None:
        return SpecState(path, digest, OUTSIDE_GIT)
    tracked = git(path.parent, "ls-files", "--error-unmatch", "--", path.name)
    if tracked is None or tracked.returncode != 0:
        return SpecState(path, digest, UNTRACKED)
    commit, committed_at = last_commit(path)
    same = git(path.parent, "diff", "--quiet", "HEAD", "--", path.name)
    return SpecState(path, digest, COMMITTED if same is not None and same.returncode == 0 else MODIFIED, commit, committed_at)


def last_commit(path: Path) -> tuple[str, str]:
    """(hash, ISO commit time) of the last commit that changed `path` ("", "" when none)."""
    found = git(path.parent, "log", "-1", "--format=%H%x09%cI", "--", path.name)
    if found is None or found.returncode != 0 or "\t" not in found.stdout:
        return "", ""
    commit, _, when = found.stdout.strip().partition("\t")
    return commit, when


def history(path: str | Path) -> list[Version]:
    """Every committed version of the spec file, newest first (renames followed); [] outside git.
    Read once per checkout state (HEAD): a report reads each spec's history several times."""
    path = Path(path).resolve()
    found = git(path.parent, "rev-parse", "--show-toplevel", "HEAD")  # one call: a report asks for every claim
    lines = found.stdout.split() if found is not None and found.returncode == 0 else []
    if len(lines) != 2:
        return []  # outside git, or a repository without a commit
    root, head = lines
    return list(_history(str(path), root, head))


@functools.lru_cache(maxsize=256)
def _history(file: str, root: str, head: str) -> tuple[Version, ...]:
    import yaml

    path = Path(file)
    log = git(path.parent, "log", "--follow", "--format=%x00%H%x09%cI", "--name-only", head, "--", path.name)
    if log is None or log.returncode != 0:
        return ()
    versions = []
    for entry in log.stdout.split("\x00")[1:]:
        head, *names = [line for line in entry.splitlines() if line.strip()]
        commit, _, when = head.partition("\t")
        shown = git(Path(root), "show", f"{commit}:{names[-1]}") if names else None
        if shown is None or shown.returncode != 0:
            continue  # the commit deleted the file under that name
        try:
            raw = yaml.safe_load(shown.stdout)
        except yaml.YAMLError:
            raw = None
        versions.append(Version(commit, when, raw if isinstance(raw, dict) else {}))
    return tuple(versions)


def rule_of(raw: dict[str, Any]) -> str:
    """The spec's verdict rule as canonical text (RULE_KEYS, without their wording), for comparing versions.

    >>> rule_of({"primary": "gap", "margin": {"value": 0.015, "reason": "words"}, "notes": "x"})
    '{"margin": {"value": 0.015}, "primary": "gap"}'
    """
    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items() if k not in WORDING_KEYS}
        return [plain(v) for v in value] if isinstance(value, list) else value

    return json.dumps({k: plain(raw[k]) for k in RULE_KEYS if raw.get(k) is not None}, sort_keys=True, default=str)


def read_raw(path: Path) -> dict[str, Any]:
    import yaml

    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    return loaded if isinstance(loaded, dict) else {}


def rule_commit(path: str | Path, versions: list[Version] | None = None) -> tuple[str, str]:
    """(hash, ISO time) of the commit that froze the working tree's rule: the oldest commit of the
    newest unbroken run of versions holding that rule. ("uncommitted", "") when no committed version
    holds it; ("", "") outside git."""
    path = Path(path).resolve()
    versions = history(path) if versions is None else versions
    if not versions:
        return ("uncommitted", "") if toplevel(path) is not None else ("", "")
    current = rule_of(read_raw(path))
    frozen = ("uncommitted", "")
    for version in versions:  # newest first
        if rule_of(version.raw) != current:
            break
        frozen = (version.commit, version.committed_at)
    return frozen
