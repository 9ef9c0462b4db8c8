#!/usr/bin/env python3
"""Run a fixed set of headlab commands and digest what they print and write, so two commits can be
compared byte for byte (a refactor must change no table, figure or printed line).

    python scripts/outputs_digest.py run OUT_DIR [NAME ...]   # runs the commands (or those named) into OUT_DIR,
                                                             # writes OUT_DIR/digest.json
    python scripts/outputs_digest.py compare A B        # the files and printed outputs that differ (exit 1 if any)

The commands: `experiment=demo` (the `make demo` run), the smoke sweep and its aggregation,
`headlab-importance` and `headlab-prune` on the demo run, `headlab-analyze-hf` (MiniLM on
zh_reviews), `headlab-reproduce` (the report from the smoke sweep's folder), the induction LM
(`experiment=induction`) and `headlab-view` on the demo and LM runs. Every output
is compared except what measures time (`*_s` and `time` keys of JSON files, checkpoints, logs)
and the commit that wrote it (`git_commit` of summary.json);
the output folder's own path is replaced by `<OUT>` so two folders compare.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
# Files whose bytes hold wall-clock times or absolute start times by design.
SKIP_SUFFIXES = (".ckpt", ".log", ".lock")
SKIP_NAMES = {"jobs_time.csv", "multirun.yaml", "hydra.yaml", "wandb"}
TIME_KEY = re.compile(r"(^|_)(s|time|wall|seconds|started|finished|date|at|pid|host|python|torch)$|_s$|^wall|time"
                      r"|^git_commit$")


def commands(out: Path) -> list[tuple[str, list[str]]]:
    demo, sweep, hf = out / "runs" / "demo", out / "sweeps" / "smoke", out / "runs" / "minilm"
    lm = out / "runs" / "induction"
    train = str(BIN / "headlab-train")
    return [
        ("demo", [train, "experiment=demo", f"hydra.run.dir={demo}"]),
        ("sweep", [train, "-m", "sweep=smoke", "hydra/launcher=joblib", f"hydra.sweep.dir={sweep}"]),
        ("aggregate", [str(BIN / "headlab-aggregate"), str(sweep)]),
        ("importance", [str(BIN / "headlab-importance"), str(demo)]),
        ("prune", [str(BIN / "headlab-prune"), str(demo), "prune.speedup=false"]),
        ("analyze_hf", [str(BIN / "headlab-analyze-hf"), "data=en_polarity", "data.probe_size=64", f"run_dir={hf}"]),
        # no evidence.NAME: no claim reads the smoke sweep (headlab-reproduce refuses a name no claim reads)
        ("report", [str(BIN / "headlab-reproduce"), f"sweeps_root={out / 'sweeps'}", f"out={out / 'report'}"]),
        ("induction", [train, "experiment=induction", f"hydra.run.dir={lm}"]),
        ("view", [str(BIN / "headlab-view"), str(demo)]),
        ("view_lm", [str(BIN / "headlab-view"), str(lm)]),
    ]


def run(out: Path, only: list[str]) -> int:
    """Run the commands (those named in `only`, else all) into `out`, then digest everything there."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HEADLAB_LOG_DIR": str(out / "logs"), "PYTHONHASHSEED": "0"}
    digest = out / "digest.json"
    printed = json.loads(digest.read_text())["printed"] if only and digest.is_file() else {}
    for name, argv in commands(out):
        if only and name not in only:
            continue
        print(f"== {name}: {' '.join(argv)}", flush=True)
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        printed[name] = {"rc": proc.returncode, "stdout": _normalise(proc.stdout, out)}
        print(f"   exit {proc.returncode}", flush=True)
        if proc.returncode not in (0, 1):
            print(proc.stderr[-2000:], file=sys.stderr)
    files = {str(p.relative_to(out)): _digest(p, out) for p in sorted(out.rglob("*"))
             if p.is_file() and _compared(p.relative_to(out))}
    (out / "digest.json").write_text(json.dumps({"printed": printed, "files": files}, indent=1, sort_keys=True))
    print(f"{len(files)} files digested into {out / 'digest.json'}")
    return 0


def _compared(rel: Path) -> bool:
    parts = set(rel.parts)
    return (rel.name != "digest.json" and not rel.name.endswith(SKIP_SUFFIXES) and not parts & SKIP_NAMES
            and ".cache" not in parts and "logs" != rel.parts[0] and ".hydra" not in parts)


def _normalise(text: str, out: Path) -> str:
    text = text.replace(str(out), "<OUT>")
    return re.sub(r"\d+(\.\d+)?\s?(s|ms|min)\b", "<T>", text)  # printed durations


def _digest(path: Path, out: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".json":
        try:
            data = json.dumps(_strip_times(json.loads(data)), sort_keys=True).encode()
        except (json.JSONDecodeError, UnicodeDecodeError):
            pass
    if path.suffix in (".json", ".md", ".csv", ".html", ".yaml", ".txt"):
        data = _normalise(data.decode("utf-8", "replace"), out).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def _strip_times(value):
    if isinstance(value, dict):
        return {k: _strip_times(v) for k, v in value.items() if not TIME_KEY.search(str(k))}
    if isinstance(value, list):
        return [_strip_times(v) for v in value]
    return value


def compare(a: Path, b: Path) -> int:
    da, db = (json.loads((d / "digest.json").read_text()) for d in (a, b))
    differ = 0
    for section in ("printed", "files"):
        keys = sorted(set(da[section]) | set(db[section]))
        same = [k for k in keys if da[section].get(k) == db[section].get(k)]
        for k in keys:
            if da[section].get(k) != db[section].get(k):
                differ += 1
                print(f"differs: {section} {k}")
        print(f"{section}: {len(same)} of {len(keys)} identical")
    return 1 if differ else 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "run":
        sys.exit(run(Path(sys.argv[2]), sys.argv[3:]))
    if len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
