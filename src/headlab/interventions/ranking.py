"""Rankings of heads and what they say: the random control, and how concentrated importance is."""

from __future__ import annotations

import torch
from torch import Tensor


def random_scores(live: Tensor, seed: int) -> Tensor:
    """`[layer, head]` uniform scores from `seed` (NaN where `live` is False): the control ranking.

    >>> live = torch.tensor([[True, True], [True, False]])
    >>> s = random_scores(live, 0); bool(torch.isnan(s[1, 1])), bool(torch.equal(s.nan_to_num(), random_scores(live, 0).nan_to_num()))
    (True, True)
    """
    generator = torch.Generator().manual_seed(int(seed))
    values = torch.rand(live.shape, generator=generator, dtype=torch.float64)
    return torch.where(live, values, torch.full_like(values, float("nan")))


def heads_for_share(effect: Tensor, share: float = 0.5) -> int:
    """Fewest heads whose positive effects sum to at least `share` of all heads' positive effect.

    Negative effects (heads whose removal helps) count as 0; NaN entries are not heads. Returns 0
    when no head has a positive effect.

    >>> heads_for_share(torch.tensor([[0.6, 0.1], [0.2, 0.1]]), 0.5), heads_for_share(torch.tensor([[0.3, 0.3], [0.2, 0.2]]), 0.5)
    (1, 2)
    """
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1]; got {share}")
    values = torch.nan_to_num(effect.double().flatten(), nan=0.0).clamp(min=0.0)
    total = float(values.sum())
    if total <= 0.0:
        return 0
    cumulative = values.sort(descending=True).values.cumsum(0)
    return int((cumulative < share * total * (1 - 1e-6)).sum()) + 1  # tolerance: float32 inputs
