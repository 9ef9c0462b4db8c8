"""The LM probe measurement: per-head pattern, copying and causal-entropy scores, per-position loss, ICL score.

The one seam for language models, as `measure_probe` is for classifiers: the probe runs through
the weight path in eval mode under `no_grad`, chunk by chunk, and `headlab.analysis.lm_heads`
reduces each chunk to per-head sums, so memory does not grow with the probe (only each sequence's
per-position loss is kept, for the ICL score's standard error). Each layer's head-by-head `js` and
`corr` (`headlab.analysis.head_similarity`, over the probe's queries) come with it, so near-duplicate
heads are found in an LM as in a classifier; every causal head gives the first query wholly to the
first token, so that one row of each sequence always agrees. The network needs
the `capture_patterns` contract plus `W_E`, `W_U` and per-head `head_weights()` (HeadlabLM).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from scipy import stats

from headlab.analysis.head_similarity import HeadSimilarityAccumulator
from headlab.analysis.lm_heads import (CAUSAL_ENTROPY, LM_PATTERN_SCORES, causal_entropy_norm_sums, icl_differences,
                                       lm_pattern_score_sums, ov_copying_score, per_position_loss,
                                       repeated_stripe_score_sums)

REPEATED_INDUCTION = "rep_induction_score"


@dataclass
class LMMeasurement:
    """One measurement of an LM: `per_layer[layer][metric] -> [head]`, the probe's loss by position.

    With a standard (repeated, no gap) probe, `per_layer` also holds `rep_induction_score` and the
    `rep_icl*` fields are set; otherwise they are None."""

    per_layer: list[dict[str, torch.Tensor]]
    loss_by_position: torch.Tensor  # [seq - 1], index t = loss of predicting token t+1
    probe_loss: float  # mean over positions
    icl: float  # loss_by_position[late] - loss_by_position[early]
    repeat_loss: float  # mean loss on the second block's tokens after its first (what induction predicts)
    icl_se: float = float("nan")  # standard error of `icl` over the probe's sequences
    rep_icl: float | None = None  # ICL on the standard probe (late: its last token; early: the first block's last)
    rep_icl_se: float | None = None
    head_pairs: list[dict[str, torch.Tensor]] | None = None  # per layer {"js", "corr"} `[head, head]` on the probe


def icl_positions(seq_len: int, half_len: int) -> tuple[int, int]:
    """(late, early) loss indices on `induction_probe` (the second block ends the sequence): late =
    predicting the second block's last token (in context), early = predicting the token right before
    the second block (random: nothing in context predicts it). On the standard probe (no gap) the
    token right before the second block is the first block's last."""
    return seq_len - 2, seq_len - half_len - 2


@torch.no_grad()
def measure_lm_probe(net: torch.nn.Module, probe: torch.Tensor, half_len: int, chunk_size: int = 64,
                     repeated: torch.Tensor | None = None) -> LMMeasurement:
    """Measure every head of the causal LM `net` on `probe` `[n, seq]` (`induction_probe` with blocks
    of `half_len`; eval mode, restored after), and on `repeated` `[m, 1 + 2 L]` (the standard test:
    BOS, L random tokens, the same L again) when given."""
    was_training = net.training
    net.eval()
    try:
        per_layer, losses, pairs = _pattern_scores(net, probe, chunk_size)
        for layer, block in enumerate(net.blocks):
            weights = block.attn.head_weights()
            per_layer[layer]["copying_score"] = ov_copying_score(net.W_E, weights.W_V, weights.W_O, net.W_U).cpu()
        loss_by_position = losses.mean(0).float()
        late, early = icl_positions(probe.size(1), half_len)
        icl = icl_differences(losses, late, early)
        repeat = loss_by_position[probe.size(1) - half_len: probe.size(1) - 1]
        measurement = LMMeasurement(per_layer, loss_by_position, float(loss_by_position.mean()), float(icl.mean()),
                                    float(repeat.mean()), _standard_error(icl), head_pairs=pairs)
        if repeated is not None:
            _add_standard_test(measurement, net, repeated, chunk_size)
        return measurement
    finally:
        net.train(was_training)


def _pattern_scores(net: torch.nn.Module, probe: torch.Tensor, chunk_size: int
                    ) -> tuple[list[dict[str, torch.Tensor]], torch.Tensor, list[dict[str, torch.Tensor]]]:
    """Per layer the probe's pattern scores `[head]`, every sequence's per-position loss `[n, seq - 1]`
    (float64), and per layer the heads' similarity `{"js", "corr"}` `[head, head]`."""
    sums = [{name: 0.0 for name in (*LM_PATTERN_SCORES, CAUSAL_ENTROPY)} for _ in net.blocks]
    similarity = [HeadSimilarityAccumulator() for _ in net.blocks]
    losses, device = [], next(net.parameters()).device
    for chunk in probe.split(chunk_size):
        chunk = chunk.to(device)
        out = net(chunk, torch.ones_like(chunk, dtype=torch.bool), return_patterns=True)
        for layer, pattern in enumerate(out.patterns):
            for name, value in lm_pattern_score_sums(pattern, chunk).items():
                if name != "n_sequences":
                    sums[layer][name] = sums[layer][name] + value.cpu()
            sums[layer][CAUSAL_ENTROPY] = sums[layer][CAUSAL_ENTROPY] + causal_entropy_norm_sums(pattern).cpu()
            similarity[layer].update(pattern, torch.ones_like(chunk, dtype=torch.bool))
        losses.append(per_position_loss(out.logits, chunk).double().cpu())
    pairs = [{name: value.cpu() for name, value in acc.compute().items()} for acc in similarity]
    return [{name: value / probe.size(0) for name, value in layer.items()} for layer in sums], torch.cat(losses), pairs


def _add_standard_test(measurement: LMMeasurement, net: torch.nn.Module, repeated: torch.Tensor, chunk_size: int) -> None:
    """`rep_induction_score` per head and the ICL score with its standard error, on the standard probe."""
    half_len = (repeated.size(1) - 1) // 2
    sums, losses, device = [0.0] * len(net.blocks), [], next(net.parameters()).device
    for chunk in repeated.split(chunk_size):
        chunk = chunk.to(device)
        out = net(chunk, torch.ones_like(chunk, dtype=torch.bool), return_patterns=True)
        sums = [total + repeated_stripe_score_sums(pattern, half_len).cpu() for total, pattern in zip(sums, out.patterns)]
        losses.append(per_position_loss(out.logits, chunk).double().cpu())
    for layer, total in enumerate(sums):
        measurement.per_layer[layer][REPEATED_INDUCTION] = total / repeated.size(0)
    icl = icl_differences(torch.cat(losses), *icl_positions(repeated.size(1), half_len))
    measurement.rep_icl, measurement.rep_icl_se = float(icl.mean()), _standard_error(icl)


def _standard_error(values: torch.Tensor) -> float:
    """scipy.stats.sem over sequences (ddof 1); NaN for a single sequence."""
    return float(stats.sem(values.numpy())) if values.numel() > 1 else float("nan")
