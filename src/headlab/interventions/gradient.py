"""Gradient importance (Michel et al. 2019, "Are Sixteen Heads Really Better than One?").

I_h = E_x |dL(x) / d xi_h|, with xi_h a gate on head h's output (1 = intact). The expectation is
over EXAMPLES (one classification loss per sequence), not over batches: a batch-mean gradient
lets examples that pull a gate in opposite directions cancel, which understates a head that
matters differently for different inputs. A causal LM's example is a sequence, its loss the sum of
its next-token losses. Per-example gradients cost one backward per batch:
each example gets its own gate copy `[batch, head]` (a forward hook on `hook_z`), and since
example b's loss depends only on its own copy, d(sum_b L_b)/d gate[b, h] = dL_b / d xi_h.
No parameter's `.grad` is touched (`torch.autograd.grad` on the gates only).

Michel et al. then normalise each layer's scores by their L2 norm (their section 4.2), so layers
compete on equal terms when heads are pruned globally: `normalize_layers`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headlab.interventions.batches import Batch, heads_per_layer, live_mask, n_sequences, predictions


def gradient_importance(net: nn.Module, batches: Sequence[Batch]) -> Tensor:
    """`[layer, head]` mean over examples of |dL/dgate| (float64; NaN where a pruned layer has no head)."""
    was_training = net.training
    net.eval()
    counts = heads_per_layer(net)
    total = torch.zeros(len(counts), max(counts), dtype=torch.float64)
    n_examples = 0
    try:
        for batch in batches:
            total += _batch_abs_grad(net, batch, counts)
            n_examples += n_sequences(batch)
    finally:
        net.train(was_training)
    if n_examples == 0:
        raise ValueError("gradient_importance needs at least one example")
    return torch.where(live_mask(net), total / n_examples, torch.full_like(total, float("nan")))


def _batch_abs_grad(net: nn.Module, batch: Batch, counts: list[int]) -> Tensor:
    """`[layer, max head]` sum over the batch's examples of |dL_b / d gate|."""
    size = n_sequences(batch)
    device = batch["input_ids"].device
    gates = [torch.ones(size, n, device=device, requires_grad=True) for n in counts]
    handles = [block.attn.hook_z.register_forward_hook(_gate_hook(g)) for block, g in zip(net.blocks, gates)]
    try:
        with torch.enable_grad():
            logits = net(batch["input_ids"], batch["attention_mask"]).logits
            predicted, truth = predictions(logits[None], batch)
            loss = F.cross_entropy(predicted[0], truth, reduction="sum")
            grads = torch.autograd.grad(loss, gates)
    finally:
        for handle in handles:
            handle.remove()
    out = torch.zeros(len(counts), max(counts), dtype=torch.float64)
    for layer, grad in enumerate(grads):
        out[layer, : counts[layer]] = grad.detach().abs().sum(dim=0).double().cpu()
    return out


def _gate_hook(gate: Tensor):
    def apply(module: nn.Module, args: object, z: Tensor) -> Tensor:  # z: [batch, pos, head_index, d_head]
        return z * gate.to(z.dtype)[:, None, :, None]

    return apply


def normalize_layers(scores: Tensor) -> Tensor:
    """Each layer's scores divided by that layer's L2 norm (NaN entries ignored; an all-zero layer stays 0).

    >>> normalize_layers(torch.tensor([[3.0, 4.0], [0.0, 0.0]]))
    tensor([[0.6000, 0.8000],
            [0.0000, 0.0000]])
    """
    filled = torch.nan_to_num(scores, nan=0.0)
    norm = filled.norm(dim=1, keepdim=True)
    return torch.where(norm > 0, scores / norm.clamp(min=torch.finfo(scores.dtype).tiny), scores)
