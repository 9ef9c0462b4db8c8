"""The LM probe measurement: per-head pattern and copying scores, per-position loss, ICL score.

The one seam for language models, as `measure_probe` is for classifiers: the probe runs through
the weight path in eval mode under `no_grad`, chunk by chunk, and `headlab.analysis.lm_heads`
reduces each chunk to per-head sums, so memory does not grow with the probe. The network needs
the `capture_patterns` contract plus `W_E`, `W_U` and per-head `head_weights()` (HeadlabLM).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from headlab.analysis.lm_heads import LM_PATTERN_SCORES, icl_score, lm_pattern_score_sums, ov_copying_score, per_position_loss


@dataclass
class LMMeasurement:
    """One measurement of an LM: `per_layer[layer][metric] -> [head]`, the probe's loss by position."""

    per_layer: list[dict[str, torch.Tensor]]
    loss_by_position: torch.Tensor  # [seq - 1], index t = loss of predicting token t+1
    probe_loss: float  # mean over positions
    icl: float  # loss_by_position[late] - loss_by_position[early]
    repeat_loss: float  # mean loss on the second block's tokens after its first (what induction predicts)


def icl_positions(seq_len: int, half_len: int) -> tuple[int, int]:
    """(late, early) loss indices on `induction_probe` (the second block ends the sequence): late =
    predicting the second block's last token (in context), early = predicting the token right before
    the second block (random: nothing in context predicts it)."""
    return seq_len - 2, seq_len - half_len - 2


@torch.no_grad()
def measure_lm_probe(net: torch.nn.Module, probe: torch.Tensor, half_len: int, chunk_size: int = 64) -> LMMeasurement:
    """Measure every head of the causal LM `net` on `probe` `[n, seq]` (`induction_probe` with blocks
    of `half_len`; eval mode, restored after)."""
    was_training = net.training
    net.eval()
    try:
        n_layers = len(net.blocks)
        sums = [{name: 0.0 for name in LM_PATTERN_SCORES} for _ in range(n_layers)]
        loss_sum, n = torch.zeros(probe.size(1) - 1, dtype=torch.float64), 0
        device = next(net.parameters()).device
        for chunk in probe.split(chunk_size):
            chunk = chunk.to(device)
            out = net(chunk, torch.ones_like(chunk, dtype=torch.bool), return_patterns=True)
            for layer, pattern in enumerate(out.patterns):
                for name, value in lm_pattern_score_sums(pattern, chunk).items():
                    if name != "n_sequences":
                        sums[layer][name] = sums[layer][name] + value.cpu()
            loss_sum += per_position_loss(out.logits, chunk).sum(0).double().cpu()
            n += chunk.size(0)
        per_layer = [{name: value / n for name, value in layer.items()} for layer in sums]
        W_E, W_U = net.W_E, net.W_U
        for layer, block in enumerate(net.blocks):
            weights = block.attn.head_weights()
            per_layer[layer]["copying_score"] = ov_copying_score(W_E, weights.W_V, weights.W_O, W_U).cpu()
        loss_by_position = (loss_sum / n).float()
        late, early = icl_positions(probe.size(1), half_len)
        repeat = loss_by_position[probe.size(1) - half_len: probe.size(1) - 1]
        return LMMeasurement(per_layer, loss_by_position, float(loss_by_position.mean()),
                             icl_score(loss_by_position, late, early), float(repeat.mean()))
    finally:
        net.train(was_training)
