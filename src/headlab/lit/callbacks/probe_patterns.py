"""The token view's data: at each measurement, every head's attention on a few fixed probe sentences.

`HeadMetricsCallback` reduces the probe to per-head sums; this keeps, beside them, the actual maps
of the first `n_sentences` probe sequences (probe order, so the same sentences at every step and in
every seed of a config), cut to their first `max_len` positions, in float16
(`headlab.store.probe_patterns`). Cost per measurement: layers x heads x sentences x T x T x 2 bytes
before compression, T = min(max_len, longest kept sentence): 0.5 MB for 2 x 4 heads and 8 x 64
positions (0.35 MB compressed for the demo), about 0.07 s on one CPU thread for the demo's model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from headlab.errors import ConfigError
from headlab.model.hooks import capture_patterns
from headlab.store.probe_patterns import drop_pattern_parts_after, write_pattern_part
from headlab.store.run_dir import RunDir


class ProbePatterns:
    """Select the sentences once (`select`), then `write` one file per measurement; off when `n_sentences == 0`."""

    def __init__(self, n_sentences: int = 8, max_len: int = 64, key: str = "callbacks.head_metrics") -> None:
        for name, value, low in (("probe_patterns", n_sentences, 0), ("probe_pattern_len", max_len, 2)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{key}.{name}", value, f"an integer >= {low}" + (" (0: no token view)" if low == 0 else ""))
        self.n_sentences, self.max_len = n_sentences, max_len
        self._ids: torch.Tensor | None = None  # [sentence, T]
        self._mask: torch.Tensor | None = None
        self._tokens: np.ndarray | None = None  # [sentence, T] str

    @property
    def enabled(self) -> bool:
        return self.n_sentences > 0

    def select(self, probe: Any, vocabulary: Any, device: torch.device | str = "cpu") -> None:
        """The first `n_sentences` sequences of `probe` (a `ProbeSet`), their tokens from `vocabulary`
        (a sequence of token strings by id; None: the ids as text)."""
        if not self.enabled:
            return
        seqs = [list(ids[: self.max_len]) for ids in probe.input_ids[: self.n_sentences]]
        if not seqs:
            self.n_sentences = 0
            return
        width = max(len(s) for s in seqs)
        ids = torch.zeros(len(seqs), width, dtype=torch.long)
        mask = torch.zeros(len(seqs), width, dtype=torch.bool)
        tokens = np.full((len(seqs), width), "", dtype=object)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s)
            mask[i, : len(s)] = True
            tokens[i, : len(s)] = [str(vocabulary[t]) if vocabulary is not None else str(t) for t in s]
        self._ids, self._mask, self._tokens = ids.to(device), mask.to(device), tokens.astype(str)

    @torch.no_grad()
    def patterns(self, net: torch.nn.Module) -> np.ndarray:
        """`[layer, head, sentence, T, T]` float32 of the selected sentences, in eval mode; zero on padding."""
        was_training = net.training
        net.eval()
        try:
            maps = capture_patterns(net, self._ids, self._mask)
        finally:
            net.train(was_training)
        keep = (self._mask[:, None, :, None] & self._mask[:, None, None, :]).float()  # [sentence, 1, q, k]
        return torch.stack([(m.float() * keep).transpose(0, 1) for m in maps]).cpu().numpy()

    def write(self, run_dir: str | Path, net: torch.nn.Module, step: int, mean_pattern: np.ndarray) -> Path | None:
        """This measurement's file in `run_dir/probe_patterns/`; None when off or not selected."""
        if not self.enabled or self._ids is None:
            return None
        lengths = self._mask.sum(1).cpu().numpy()
        return write_pattern_part(RunDir(run_dir).probe_patterns_dir, step, self.patterns(net), lengths, self._tokens,
                                  mean_pattern)

    def drop_after(self, run_dir: str | Path, step: int) -> int:
        """A resumed run measures the steps after its checkpoint again: drop their files first."""
        return drop_pattern_parts_after(RunDir(run_dir).probe_patterns_dir, step)
