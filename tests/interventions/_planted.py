"""A hand-built classifier in which ONE head carries the label, and data it classifies perfectly.

Tokens: 0 [PAD], 1 [CLS], 2 A, 3 B, 4..9 noise. Every sequence is [CLS] + 2..6 tokens with exactly
one A (label 1) or B (label 0) among noise tokens. d_model = 8, two layers of 4 heads (d_head 2),
all queries and keys zero (uniform attention over real keys), MLPs zero, CLS pooling.

- Layer 0, head `PLANTED` reads residual dim 0 (A: +, B: -) and writes +/- to dims 0 / 1; the
  classifier reads dim 0 only, so this head is the ONLY path from the marker to the logits.
- Layer 0's other heads copy noise dims (2|3, 4|5, 6|7) onto themselves: they change the final
  LayerNorm's scale, never the sign of dim 0, so removing one cannot flip a prediction.
- Layer 1 has zero value weights: it does nothing.
Every embedding and head output is zero-sum across dims, so LayerNorm never shifts dim 0's sign.
Without the planted head a small bias decides: every prediction is class 0: accuracy = share of B.
"""

from __future__ import annotations

import torch

from headlab.model import HeadlabClassifier, ModelConfig

PLANTED = (0, 2)
A, B, CLS, PAD = 2, 3, 1, 0
NOISE = tuple(range(4, 10))


def planted_model() -> HeadlabClassifier:
    config = ModelConfig(vocab_size=10, n_classes=2, max_len=8, n_layers=2, n_heads=4, d_model=8, d_ff=4,
                         dropout=0.0, pos_encoding="none", pooling="cls")
    net = HeadlabClassifier(config)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        for ln in (net.ln_f, *[m for b in net.blocks for m in (b.ln_1, b.ln_2)]):
            ln.weight.fill_(1.0)
        emb = net.tok_emb.weight
        emb[CLS] = torch.tensor([0, 0, 1, -1, 1, -1, 1, -1]) * 0.5
        emb[A, :2] = torch.tensor([1.0, -1.0])
        emb[B, :2] = torch.tensor([-1.0, 1.0])
        for tok in NOISE:
            r = torch.rand(3, generator=g) + 0.5
            emb[tok, 2:] = torch.stack([r, -r], dim=1).flatten()
        attn = net.blocks[0].attn
        _, head = PLANTED
        attn.v_proj.weight[2 * head, 0] = 1.0  # planted head: v = dim 0
        attn.out_proj.weight[0, 2 * head] = 1.0
        attn.out_proj.weight[1, 2 * head] = -1.0
        noise_dims = iter((2, 4, 6))
        for h in range(4):
            if h == head:
                continue
            d = next(noise_dims)
            attn.v_proj.weight[2 * h, d] = 1.0
            attn.out_proj.weight[d, 2 * h] = 1.0
            attn.out_proj.weight[d + 1, 2 * h] = -1.0
        net.classifier.weight[1, 0] = 5.0
        net.classifier.weight[0, 0] = -5.0
        net.classifier.bias[0] = 0.01  # without the planted head: class 0, not a float-noise coin flip
    return net.eval()


def planted_batches(n: int = 128, batch_size: int = 32, seed: int = 1) -> list[dict[str, torch.Tensor]]:
    """Balanced labels, random lengths and marker positions, right padding."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 2
    labels = labels[torch.randperm(n, generator=g)]
    ids = torch.zeros(n, 7, dtype=torch.long)
    mask = torch.zeros(n, 7, dtype=torch.long)
    for i in range(n):
        length = int(torch.randint(2, 7, (1,), generator=g))
        tokens = torch.tensor(NOISE)[torch.randint(0, len(NOISE), (length,), generator=g)]
        tokens[int(torch.randint(0, length, (1,), generator=g))] = A if labels[i] == 1 else B
        ids[i, 0], ids[i, 1 : length + 1] = CLS, tokens
        mask[i, : length + 1] = 1
    return [{"input_ids": ids[s : s + batch_size], "attention_mask": mask[s : s + batch_size],
             "labels": labels[s : s + batch_size]} for s in range(0, n, batch_size)]
