"""The teacher of a distillation run: a finished headlab run dir, loaded frozen, checked against the student.

A run dir holds `vocab.json` (the tokenizer its data was encoded with), `summary.json` (which
checkpoint was best) and `checkpoints/`. The student must read the same token ids as the teacher:
`check_vocabulary` refuses a student whose data tokenizer differs (a different source, data.seed
or min_freq gives another vocabulary), since the teacher's attention on other ids means nothing.
"""

from __future__ import annotations

from pathlib import Path

import torch

from headlab.errors import ConfigError, HeadlabError
from headlab.model import HeadlabClassifier
from headlab.reload import load_network
from headlab.store import RunDir

CHECKPOINTS = ("best", "last")


def teacher_checkpoint(run_dir: str | Path, which: str = "best", key: str = "teacher") -> Path:
    """The checkpoint of a headlab run dir: `best` (summary.json's best_checkpoint; `last` when the
    run kept none) or `last` (`checkpoints/last.ckpt`). A path that is not such a run dir: ConfigError."""
    if which not in CHECKPOINTS:
        raise ConfigError("distill.teacher_checkpoint", which, f"one of {list(CHECKPOINTS)}")
    root = Path(str(run_dir)).expanduser()
    run = RunDir(root)
    allowed = "a headlab run dir (with vocab.json and checkpoints/), e.g. one written by headlab-train"
    if not root.is_dir():
        hint = " (a MiniLM teacher is not built: docs/distill.md)" if str(run_dir).lower() == "minilm" else ""
        raise ConfigError(key, str(run_dir), f"{allowed}; no such directory{hint}")
    if not run.vocab_path.is_file():
        raise ConfigError(key, str(run_dir), f"{allowed}; it has no vocab.json")
    checkpoint = run.teacher_checkpoint(which)
    if checkpoint is None:
        raise ConfigError(key, str(run_dir), f"{allowed}; it has no checkpoints/last.ckpt (did its training finish?)")
    return checkpoint


def load_teacher(run_dir: str | Path, which: str = "best") -> torch.nn.Module:
    """The teacher's `HeadlabClassifier`, frozen (no gradients) and in eval mode.

    Built under a forked RNG: creating the network draws initial weights, and a student run must
    draw the same random numbers (dropout, init) as a plain run of its seed.
    """
    path = teacher_checkpoint(run_dir, which)
    with torch.random.fork_rng(devices=[]):
        try:
            net = load_network(path)
        except HeadlabError as err:
            raise ConfigError("teacher", str(run_dir), f"a run dir with a loadable headlab checkpoint ({err})") from None
    if not isinstance(net, HeadlabClassifier):
        raise ConfigError("teacher", str(run_dir), f"a classifier's run dir; it holds a {type(net).__name__} "
                                                   "(experiment=induction), and distillation teaches a classifier")
    for param in net.parameters():
        param.requires_grad_(False)
    return net.eval()


def check_vocabulary(run_dir: str | Path, student_tokens: tuple[str, ...] | list[str]) -> None:
    """The student's data tokenizer must be the teacher's (same tokens, same ids)."""
    from headlab.data.tokenizer import CharTokenizer

    vocab_path = RunDir(Path(str(run_dir)).expanduser()).vocab_path
    teacher_tokens = CharTokenizer.load(vocab_path).tokens
    if tuple(teacher_tokens) != tuple(student_tokens):
        differ = "sizes differ" if len(teacher_tokens) != len(student_tokens) else "same size, other tokens or order"
        raise ConfigError("teacher", str(run_dir),
                          f"a teacher whose vocabulary is the student's data vocabulary: teacher {vocab_path} has "
                          f"{len(teacher_tokens)} tokens, the student's data {len(student_tokens)} ({differ}); "
                          "train the student on the teacher's data source, data.seed and data.min_freq")
