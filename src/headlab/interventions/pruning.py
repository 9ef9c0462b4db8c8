"""Iterative head pruning: remove the least important heads, optionally fine-tune, re-rank, repeat.

Heads are removed physically (`HeadlabClassifier.prune_heads`, `HeadlabLM.prune_heads`), so the pruned network is really
smaller and faster. The loop stops before the step whose accuracy on the selection split (validation,
or one half of it: `select`) falls more than `max_drop` below the unpruned network's; that step is still recorded (`accepted=False`) so the
curve shows where the drop happened, and the returned network is the last accepted one.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from headlab.interventions.ablation import single_head_ablation
from headlab.interventions.batches import Batch, evaluate_gated, heads_per_layer, live_mask, predictions
from headlab.interventions.gradient import gradient_importance, normalize_layers
from headlab.interventions.ranking import random_scores
from headlab.interventions.scores import Scores

# The rankings `head_scores` knows (headlab-prune's `prune.ranking`): seed_avg is ablation averaged over a sweep
# config's seeds.
PRUNE_RANKINGS = ("ablation", "gradient", "random", "seed_avg")
FIXED_RANKINGS = ("random", "seed_avg")  # scores per ORIGINAL head, never re-measured on the pruned network
# Which examples rank the heads and decide the stop (`prune.selection`): the whole validation split, or its half A
# (even positions of the split as the datamodule orders it), with half B (odd positions) and test read only for the
# report (headlab.tasks.pruning.val_halves).
PRUNE_SELECTIONS = ("val", "val_half")


@dataclass
class PruneStep:
    """One round: the heads removed (ORIGINAL `(layer, head)` indices) and the network's scores after it."""

    index: int
    removed: list[tuple[int, int]]
    n_heads: int
    n_params: int
    scores: dict[str, Scores]  # split name -> one-variant scores
    accepted: bool


@dataclass
class PruneResult:
    net: nn.Module  # the last accepted network (physically pruned)
    removed: list[list[int]]  # per layer, the ORIGINAL head indices removed from it
    steps: list[PruneStep] = field(default_factory=list)


def head_scores(net: nn.Module, batches: Sequence[Batch], ranking: str, *, normalize: bool = False,
                random_seed: int = 0, origin: list[list[int]] | None = None, max_rows: int = 4096,
                fixed: Tensor | None = None) -> Tensor:
    """`[layer, head]` importance of the CURRENT heads for `ranking` (higher = keep longer).

    The random and seed_avg rankings score ORIGINAL head ids (`origin[layer][current]`), so a head
    keeps its score as others are removed around it. `seed_avg` takes its scores as `fixed`
    (`[layer, original head]`: e.g. ablation importance averaged over a sweep config's seeds after
    matching, `headlab.sweep.importance.seed_averaged_importance`), measured outside this network.
    """
    if ranking == "ablation":
        return single_head_ablation(net, batches, max_rows=max_rows).dloss
    if ranking == "gradient":
        scores = gradient_importance(net, batches)
        return normalize_layers(scores) if normalize else scores
    if ranking in FIXED_RANKINGS:
        origin = origin or [list(range(n)) for n in heads_per_layer(net)]
        if ranking == "random":
            full = random_scores(torch.ones(len(origin), max(max(o) for o in origin) + 1, dtype=torch.bool), random_seed)
        elif fixed is None:
            raise ValueError("ranking 'seed_avg' needs its scores per original head (fixed=[layer, head])")
        else:
            full = fixed.to(torch.float64)
        out = torch.full(live_mask(net).shape, float("nan"), dtype=torch.float64)
        for layer, heads in enumerate(origin):
            out[layer, : len(heads)] = full[layer, heads]
        return out
    raise ValueError(f"ranking must be one of {PRUNE_RANKINGS}; got {ranking!r}")


def least_important(scores: Tensor, n: int) -> dict[int, list[int]]:
    """The `n` lowest-scoring current heads `{layer: [heads]}`, never a layer's last head.

    >>> least_important(torch.tensor([[0.1, 0.2], [0.0, 5.0]]), 2)
    {1: [0], 0: [0]}
    """
    flat = [(float(scores[l, h]), l, h) for l in range(scores.shape[0]) for h in range(scores.shape[1])
            if not math.isnan(float(scores[l, h]))]
    left = {l: sum(1 for _, ll, _ in flat if ll == l) for l in range(scores.shape[0])}
    chosen: dict[int, list[int]] = {}
    for _, layer, head in sorted(flat):
        if len(sum(chosen.values(), [])) == n:
            break
        if left[layer] > 1:
            chosen.setdefault(layer, []).append(head)
            left[layer] -= 1
    return chosen


def iterative_prune(net: nn.Module, splits: dict[str, Sequence[Batch]], *, ranking: str, fraction_per_step: float,
                    max_drop: float, recompute: bool = True, normalize: bool = False, random_seed: int = 0,
                    finetune: Callable[[nn.Module], None] | None = None, max_rows: int = 4096,
                    count_parameters: Callable[[nn.Module], int], fixed_scores: Tensor | None = None,
                    select: str = "val") -> PruneResult:
    """Prune `net` (a copy; the argument is untouched). `splits[select]` (default `val`) ranks heads and
    decides when to stop, and nothing else does; every split in `splits` is scored after each step, for
    the record only (a held-out split read there never steers the loop). `fixed_scores`: the `seed_avg`
    ranking's `[layer, original head]` scores."""
    if not 0.0 < fraction_per_step < 1.0:
        raise ValueError(f"fraction_per_step must be in (0, 1); got {fraction_per_step}")
    if max_drop < 0:
        raise ValueError(f"max_drop must be >= 0; got {max_drop}")
    if select not in splits:
        raise ValueError(f"select must name one of the splits {sorted(splits)}; got {select!r}")
    current = copy.deepcopy(net).eval()
    origin = [list(range(n)) for n in heads_per_layer(current)]
    result = PruneResult(current, [[] for _ in origin])
    base = {name: evaluate_gated(current, batches) for name, batches in splits.items()}
    result.steps.append(PruneStep(0, [], sum(map(len, origin)), count_parameters(current), base, True))
    scores = _scores(current, splits[select], ranking, normalize, random_seed, origin, max_rows, fixed_scores)
    while True:
        n_live = sum(map(len, origin))
        chosen = least_important(scores, max(1, round(fraction_per_step * n_live)))
        if not chosen:
            break  # every layer is down to one head
        candidate = copy.deepcopy(current)
        candidate.prune_heads(chosen)
        if finetune is not None:
            finetune(candidate)
        candidate.eval()
        removed = sorted((layer, origin[layer][h]) for layer, hs in chosen.items() for h in hs)
        after = {name: evaluate_gated(candidate, batches) for name, batches in splits.items()}
        accepted = float(base[select].acc[0] - after[select].acc[0]) <= max_drop
        result.steps.append(PruneStep(len(result.steps), removed, n_live - len(removed), count_parameters(candidate),
                                      after, accepted))
        if not accepted:
            break
        current, origin = candidate, [[h for i, h in enumerate(o) if i not in chosen.get(l, [])] for l, o in enumerate(origin)]
        for layer, head in removed:
            result.removed[layer].append(head)
        result.net = current
        if recompute or finetune is not None:
            scores = _scores(current, splits[select], ranking, normalize, random_seed, origin, max_rows, fixed_scores)
        else:
            scores = _drop(scores, chosen)
    return result


def _scores(net: nn.Module, batches: Sequence[Batch], ranking: str, normalize: bool, seed: int,
            origin: list[list[int]], max_rows: int, fixed: Tensor | None = None) -> Tensor:
    return head_scores(net, batches, ranking, normalize=normalize, random_seed=seed, origin=origin, max_rows=max_rows,
                       fixed=fixed)


def _drop(scores: Tensor, chosen: dict[int, list[int]]) -> Tensor:
    """The same scores re-indexed after removing `chosen` (pruned layers' rows shift left, NaN-padded)."""
    out = torch.full_like(scores, float("nan"))
    for layer in range(scores.shape[0]):
        kept = [h for h in range(scores.shape[1]) if h not in chosen.get(layer, []) and not math.isnan(float(scores[layer, h]))]
        out[layer, : len(kept)] = scores[layer, kept]
    return out[:, : max(1, int((~torch.isnan(out)).sum(dim=1).max()))]


def finetune_steps(net: nn.Module, batches: Sequence[Batch], steps: int, lr: float, seed: int = 0) -> None:
    """`steps` AdamW steps at learning rate `lr` on `batches` (cycled in a seeded order), in place.

    `seed` also seeds dropout, inside a forked RNG (the caller's global RNG state is untouched): the
    same network, batches and seed give the same fine-tuned weights in every process."""
    if steps <= 0:
        return
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0.0)
    device = next(net.parameters()).device
    cuda = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        net.train()
        done = 0
        while done < steps:
            for i in torch.randperm(len(batches), generator=generator).tolist():
                batch = batches[i]
                predicted, truth = predictions(net(batch["input_ids"], batch["attention_mask"]).logits[None], batch)
                loss = nn.functional.cross_entropy(predicted[0], truth)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                optimizer.step()
                done += 1
                if done == steps:
                    break
    net.eval()
