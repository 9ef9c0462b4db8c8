"""Weight-space view of heads: how alike their projections are and how far they moved.

Weights use the per-head (TransformerLens) layout: `W_Q, W_K, W_V: [head, d_model, d_head]`,
`W_O: [head, d_head, d_model]`, so a head is an index. Random heads start nearly orthogonal:
the cosine of two independent random d-dim directions has mean 0 and std 1/sqrt(d)
(`random_cosine_std`), the baseline against which learned similarity is read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from headlab.errors import ConfigError, DataError


def random_cosine_std(d: int) -> float:
    """Std of the cosine between two independent random `d`-dim directions: 1/sqrt(d).

    >>> random_cosine_std(64)
    0.125
    """
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise ConfigError("d", d, "a positive integer dimension")
    return 1.0 / math.sqrt(d)


def head_cosine(weights: Tensor) -> Tensor:
    """`[head, head]` cosine similarity of the flattened per-head matrices `weights [head, ...]`.

    A zero head (e.g. pruned) has cosine 0 with every head, itself included.

    >>> head_cosine(torch.tensor([[1., 0.], [0., 2.], [3., 0.]])).tolist()
    [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 1.0]]
    """
    flat = _per_head(weights, "weights").flatten(1)
    unit = torch.nn.functional.normalize(flat, dim=1)
    return unit @ unit.T


def qk_cosine(W_Q: Tensor, W_K: Tensor) -> Tensor:
    """`[head, head]` cosine between heads' bilinear forms W_Q W_K^T `[d_model, d_model]`.

    W_Q alone is not identifiable (W_Q R, W_K R give the same scores for any rotation R); the
    product is what the attention scores actually depend on.
    """
    _same_shape(W_Q, W_K, "W_K")
    if W_Q.ndim != 3:
        raise DataError("W_Q", f"expected [head, d_model, d_head], got {list(W_Q.shape)}")
    return head_cosine(torch.einsum("hmd,hnd->hmn", W_Q, W_K))


def subspace_similarity(weights: Tensor) -> Tensor:
    """`[head, head]` mean cosine of the principal angles between heads' column spaces.

    `weights [head, d_model, d_head]`: 1 = same subspace, 0 = orthogonal subspaces. Rank is
    taken per head (as `scipy.linalg.orth`), and the mean runs over min(rank_a, rank_b) angles;
    a zero head has no subspace (NaN).

    >>> e = torch.eye(3)
    >>> W = torch.stack([e[:, :2], e[:, 1:], 2 * e[:, :2].flip(-1)])   # xy-, yz-, xy-plane
    >>> subspace_similarity(W).tolist()
    [[1.0, 0.5, 1.0], [0.5, 1.0, 0.5], [1.0, 0.5, 1.0]]
    """
    if _per_head(weights, "weights").ndim != 3:
        raise DataError("weights", f"expected [head, d_model, d_head], got {list(weights.shape)}")
    basis, singular, _ = torch.linalg.svd(weights, full_matrices=False)  # [h, d_model, r], [h, r]
    tol = singular.amax(-1, keepdim=True) * max(weights.shape[1:]) * torch.finfo(weights.dtype).eps
    kept = singular > tol  # [head, r]
    basis = basis * kept[:, None, :]
    cosines = torch.linalg.svdvals(torch.einsum("amr,bms->abrs", basis, basis)).clamp(0.0, 1.0)
    rank = kept.sum(-1)
    n_angles = torch.minimum(rank[:, None], rank[None, :]).to(weights.dtype)
    similarity = cosines.sum(-1) / n_angles  # zero columns add zero cosines
    return 0.5 * (similarity + similarity.T)


def relative_distance_from_init(now: Tensor | Sequence[Tensor], init: Tensor | Sequence[Tensor]) -> Tensor:
    """`[head]` ||W_h - W0_h||_F / ||W0_h||_F, several matrices per head (e.g. Q, K, V, O) pooled.

    Each of `now`, `init` is one tensor `[head, ...]` or a sequence of them (concatenated per head).

    >>> relative_distance_from_init(torch.tensor([[3., 4.], [1., 1.]]), torch.tensor([[0., 4.], [1., 1.]]))
    tensor([0.7500, 0.0000])
    """
    now_flat, init_flat = _concat_heads(now, "now"), _concat_heads(init, "init")
    _same_shape(now_flat, init_flat, "init")
    return (now_flat - init_flat).norm(dim=1) / init_flat.norm(dim=1)


def per_head_grad_norm(
    grad_W_Q: Tensor | None, grad_W_K: Tensor | None, grad_W_V: Tensor | None, grad_W_O: Tensor | None
) -> Tensor:
    """`[head]` L2 norm of each head's gradient slices of W_Q, W_K, W_V `[head, d_model, d_head]`
    and W_O `[head, d_head, d_model]`; a projection without gradient (None, e.g. frozen) adds nothing.
    """
    grads = [g for g in (grad_W_Q, grad_W_K, grad_W_V, grad_W_O) if g is not None]
    if not grads:
        raise DataError("per_head_grad_norm", "all gradients are None (call it after backward())")
    return _concat_heads(grads, "grad").norm(dim=1)


def _per_head(weights: Tensor, name: str) -> Tensor:
    if not isinstance(weights, Tensor) or weights.ndim < 2 or not weights.is_floating_point():
        got = list(weights.shape) if isinstance(weights, Tensor) else type(weights).__name__
        raise DataError(name, f"expected a float tensor [head, ...], got {got}")
    return weights


def _concat_heads(weights: Tensor | Sequence[Tensor], name: str) -> Tensor:
    """`[head, total]`: every tensor flattened per head and concatenated."""
    parts = [weights] if isinstance(weights, Tensor) else list(weights)
    if not parts:
        raise DataError(name, "expected at least one tensor [head, ...]")
    flat = [_per_head(p, name).flatten(1) for p in parts]
    heads = {f.shape[0] for f in flat}
    if len(heads) != 1:
        raise DataError(name, f"all matrices must have the same number of heads, got {sorted(heads)}")
    return torch.cat(flat, dim=1)


def _same_shape(reference: Tensor, other: Tensor, name: str) -> None:
    if tuple(reference.shape) != tuple(other.shape):
        raise DataError(name, f"expected shape {list(reference.shape)}, got {list(other.shape)}")
