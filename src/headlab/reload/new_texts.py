"""A trained classifier run applied to new texts: `predict(run_dir, ["text", ...])`.

Everything comes from the run folder itself, so it works from any directory and after the folder
moved: the vocabulary (`vocab.json`, character or word, JSON only), the label names (summary.json
`data.label_names`), and the network of a checkpoint (`torch.load(weights_only=True)`: nothing in the
folder runs code). New text is tokenised as in training (`tokenize`): [CLS] first, truncated to the
model's `max_len`, characters (or words) unseen in training become [UNK]. The data files are not read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from headlab.data.collate import pad_right
from headlab.data.tokenizer import UNK_ID, CharTokenizer, load_tokenizer
from headlab.errors import ConfigError, DataError
from headlab.model import HeadlabClassifier
from headlab.reload.network import load_network
from headlab.store import RunDir

CHECKPOINTS = ("best", "last")


@dataclass(frozen=True)
class Prediction:
    """One text's prediction: the most probable label, every label's probability, and how many of its
    tokens the run's vocabulary did not know (a high count: the text is unlike the training data)."""

    text: str
    label: str
    probabilities: dict[str, float]  # label name -> probability, in the run's class order
    n_tokens: int  # tokens the model saw, [CLS] included (after truncation to max_len)
    n_unknown: int  # of those, [UNK]


class Predictor:
    """A run's tokenizer, label names and network, loaded once for many `predict` calls."""

    def __init__(self, run_dir: str | os.PathLike, checkpoint: str = "best", device: str = "cpu") -> None:
        if checkpoint not in CHECKPOINTS:
            raise ConfigError("checkpoint", checkpoint, f"one of {list(CHECKPOINTS)}")
        run = RunDir(Path(run_dir))
        if not run.path.is_dir():
            raise DataError(run.path, "no such run directory")
        self.run = run
        self.tokenizer: CharTokenizer = load_tokenizer(run.vocab_path)
        path = (run.best_checkpoint() if checkpoint == "best" else None) or run.existing_last_checkpoint()
        if path is None:
            raise DataError(run.path, "no checkpoint to predict with (checkpoints/last.ckpt is missing)")
        net = load_network(path)
        if not isinstance(net, HeadlabClassifier):
            raise DataError(run.path, "a language-model run: predict classifies texts; it needs a classifier run")
        if net.config.domain_split_layers and net.config.domain_router == "none":
            raise DataError(run.path, "its model picks Q/K/V by each text's domain id (model.domain_split_layers): "
                                      "predict has no domain to give it")
        self.checkpoint = path
        self.net = net.to(device).eval()
        self.device = device
        self.max_len = int(net.config.max_len)
        self.label_names = _label_names(run, int(net.config.n_classes))

    def tokenize(self, text: str) -> list[int]:
        """The ids the model sees for `text`: [CLS], then one per character (or word), at most max_len."""
        if not isinstance(text, str):
            raise DataError("predict", f"every text must be a string, got {type(text).__name__}: {text!r}")
        return self.tokenizer.encode(text.strip(), self.max_len)

    @torch.inference_mode()
    def predict(self, texts: Sequence[str], batch_size: int = 64) -> list[Prediction]:
        """One `Prediction` per text, in order."""
        if isinstance(texts, str):
            raise DataError("predict", "texts must be a list of strings, got one string: predict(run, [text])")
        ids = [self.tokenize(t) for t in texts]
        out: list[Prediction] = []
        for start in range(0, len(ids), batch_size):
            chunk = ids[start:start + batch_size]
            input_ids, mask = pad_right(chunk)
            probs = torch.softmax(self.net(input_ids.to(self.device), mask.to(self.device)).logits.float(), dim=-1).cpu()
            for offset, (row, seq) in enumerate(zip(probs.tolist(), chunk)):
                best = max(range(len(row)), key=row.__getitem__)
                out.append(Prediction(texts[start + offset], self.label_names[best], dict(zip(self.label_names, row)),
                                      len(seq), sum(i == UNK_ID for i in seq)))
        return out


def predict(run_dir: str | os.PathLike, texts: Sequence[str], checkpoint: str = "best", device: str = "cpu",
            batch_size: int = 64) -> list[Prediction]:
    """Classify `texts` with the run in `run_dir` (its `best` checkpoint, else `last`): one `Prediction`
    each. For many calls on one run, build a `Predictor` once."""
    return Predictor(run_dir, checkpoint, device).predict(texts, batch_size)


def tokenize(run_dir: str | os.PathLike, text: str, max_len: int | None = None) -> list[str]:
    """`text` as the run's tokens (strings: "[CLS]", characters or words, "[UNK]" for unseen ones)."""
    tokenizer = load_tokenizer(RunDir(Path(run_dir)).vocab_path)
    ids = tokenizer.encode(text, max_len or len(tokenizer.split(text)) + 1)
    return [tokenizer.tokens[i] for i in ids]


def _label_names(run: RunDir, n_classes: int) -> list[str]:
    """summary.json's `data.label_names`; a run from before they were recorded: "0", "1", ... (class ids)."""
    names: Any = (run.summary.get("data") or {}).get("label_names")
    if isinstance(names, list) and len(names) == n_classes and all(isinstance(n, str) for n in names):
        return names
    return [str(i) for i in range(n_classes)]
