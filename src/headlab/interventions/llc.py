"""Local learning coefficient (LLC) of a causal LM and each head's refined LLC, sampled with devinterp.

The LLC (Lau et al. 2023) measures how degenerate the loss basin around the trained weights w* is:
SGLD samples weights near w* from the tempered, localised posterior and the estimate is
n_beta * (E[L_n(w)] - L_n(w*)). The refined LLC (Wang et al., ICLR 2025) samples only one head's
W_Q, W_K, W_V, W_O (rows of q/k/v_proj with their biases, columns of out_proj) with the rest of the
network frozen, so it describes how much structure that head's weights carry: a head that forms a
circuit (an induction head) shows its rLLC change when it forms, a zeroed head's is ~0.

The sampling is devinterp's (`devinterp.slt.sampling.sample`, an optional dependency: `pip install
headlab[llc]`); this module builds the head masks for headlab's `HeadlabLM` and `HeadlabClassifier`
(devinterp reads token rows only, so a classifier's examples travel packed as `[label, length, ids...]`
rows, `classifier_rows`, and `classification_loss` unpacks them), reads the samples and
takes the estimate over the draws after burn-in, paired with the trained weights' loss on the same
batches (see `LLCEstimate`), with a flatness diagnostic of each chain (a chain whose loss still
climbs at the end has not settled: too few burn-in steps for its step size and localization).
`headlab-llc` (headlab.tasks.llc) calls `estimate_head_llcs` per checkpoint and writes `head_metric_frame`.
"""

from __future__ import annotations

import copy
import gc
import math
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from scipy import stats
from torch import Tensor, nn
from torch.utils.data import Dataset

from headlab.config.values import check_int
from headlab.errors import ConfigError
from headlab.store.tables import HEAD_METRIC_COLUMNS

METRICS = ("llc", "rllc")  # whole model (llc.parquet only), head (also head_metrics.parquet, with `rllc_std`)
WHOLE_MODEL = -1  # the layer and head of the whole-model `llc` rows
ROW_COLUMNS = ("step", "layer", "head", "metric", "value", "std", "n_chains", "devinterp_value", "max_abs_drift", "flat")


@dataclass
class SGLDSettings:
    """SGLD hyper-parameters (devinterp's names in brackets), calibrated on the induction LM (2 layers x
    4 heads, d_model 64, vocab 64, 33 tokens; 512 held-out sequences) on 2 CPU cores, 2026-12-02:
    - lr 3e-4, 1e-3 and 3e-3 give the same whole-model LLC within 10% (4.8 / 4.7 / 5.1 at step 400,
      15.6 / 16.2 / 17.3 at step 2,000: a plateau in the step size), 1e-3 in its middle;
    - localization 100 settles a chain in ~2 / (lr * localization) = 20 steps, so 50 burn-in steps;
    - nbeta 30 (devinterp's default_nbeta for batch 32 is 9.2): every estimate positive at steps 400,
      1,600 and 2,500 (whole model 4.9, 17.5, 13.9; heads 0.005-2.0);
    - 2 chains x 100 draws: one checkpoint (whole model + 8 heads) took 157-179 s (whole model 19-25 s,
      a head 15-22 s) on the 2 cores at load average 7-8; `flat` flagged 14 of the 27 estimates
      (5 of 9 at step 400, where the model still descends and a head's excess loss is ~0.001 nat,
      at the level of the batch noise; its p-value is optimistic for autocorrelated draws). Four times the burn-in and twice the
      draws moved the whole model by 2% (13.9 -> 14.2) and one flagged induction head by 26% (L1H0
      1.12 -> 1.41, chains 1.67 and 1.15): the defaults are a cheap survey; a flagged estimate needs
      longer chains (more chains and draws are opt-in).
    Other model sizes need their own check: the `flat` diagnostic and a step-size plateau.
    """

    lr: float = 1e-3  # SGLD step size epsilon [lr]
    localization: float = 100.0  # pull gamma towards the trained weights [localization]
    nbeta: float = 30.0  # inverse temperature n * beta [n_beta]
    chains: int = 2  # [num_chains]
    draws: int = 100  # draws per chain after burn-in, one per step [num_draws]
    burnin: int = 50  # steps per chain before the first draw, left out of the estimate [num_burnin_steps]
    batch_size: int = 32
    seed: int = 0  # chain c's noise seed is seed + c; the batch order is the seed's [init_seed]
    flat_tolerance: float = 0.2  # most |drift| (see LLCEstimate) a settled chain may show ...
    trend_alpha: float = 0.05  # ... unless its slope is not told apart from 0 at this level

    def __post_init__(self) -> None:
        """The ranges, named by the keys headlab-llc reads them from (`llc.KEY`)."""
        for key in ("lr", "nbeta", "flat_tolerance"):
            if not getattr(self, key) > 0:
                raise ConfigError(f"llc.{key}", getattr(self, key), "a number > 0")
        if self.localization < 0:
            raise ConfigError("llc.localization", self.localization, "a number >= 0")
        if not 0 < self.trend_alpha < 1:
            raise ConfigError("llc.trend_alpha", self.trend_alpha, "a number in (0, 1)")
        for key, minimum in (("chains", 1), ("draws", 4), ("burnin", 0), ("batch_size", 1), ("seed", 0)):
            check_int(f"llc.{key}", getattr(self, key), minimum)


@dataclass
class LLCEstimate:
    """One estimate: `metric` `llc` (whole model, layer = head = -1) or `rllc` (one head).

    Two estimators over the draws after burn-in, per chain `[chain]`:
    - `per_chain` (the one reported, `value` +- `std` over chains) = nbeta * mean over draws of
      (batch loss at the sample - the same batch's loss at the trained weights): paired, so the
      batch-to-batch spread of the loss (~0.05 nat here) cancels; a head's elevation is ~0.001 nat.
    - `devinterp_value` (+- `devinterp_std`) = nbeta * (mean batch loss at the samples - `init_loss`),
      devinterp's estimator (`compute_llc`, restricted to the draws): it carries the difference between
      the draws' batches and the init-loss batches, a bias of the size of a head's signal.
    `loss_trace` `[chain, step]` is every SGLD step's batch loss (burn-in included), `reference` `[step]`
    the trained weights' loss on the same batches. `drift` `[chain]`, the flatness diagnostic: the
    least-squares slope of the last half of the draws' excess loss times its length, over the mean
    excess (0 = flat; 0.5 = it still rose by half of what the estimate measures), `drift_p` `[chain]`
    the p-value of that slope (scipy's linregress; it treats the draws as independent, which SGLD draws
    are not, so it is optimistic). `flat`: every chain finite, and each chain's drift either within the
    settings' tolerance or not told apart from 0 (p >= trend_alpha): a head's excess loss is ~0.001 nat,
    so its relative drift alone is mostly batch noise.
    """

    metric: str
    layer: int
    head: int
    value: float
    std: float
    per_chain: np.ndarray
    devinterp_value: float
    devinterp_std: float
    init_loss: float
    loss_trace: np.ndarray
    reference: np.ndarray
    drift: np.ndarray
    drift_p: np.ndarray
    flat: bool
    settings: SGLDSettings
    seconds: float

    @property
    def n_chains(self) -> int:
        return int(self.per_chain.size)


def head_param_masks(net: nn.Module, layer: int, head: int) -> dict[str, Tensor]:
    """devinterp parameter masks selecting head `head` of layer `layer` of a `HeadlabLM`: its rows of
    q/k/v_proj (weight and bias: W_Q, W_K, W_V, b_Q, b_K, b_V) and its columns of out_proj (W_O).
    out_proj's bias is shared by all heads, so no head owns it."""
    blocks = getattr(net, "blocks", None)
    if blocks is None or not hasattr(blocks[0], "attn"):
        raise TypeError(f"expected a HeadlabLM (blocks[i].attn); got {type(net).__name__}")
    if not isinstance(layer, int) or not 0 <= layer < len(blocks):
        raise ValueError(f"layer must be an integer in [0, {len(blocks) - 1}]; got {layer!r}")
    attn = blocks[layer].attn
    if attn.domain_qkv is not None:
        raise ValueError(f"layer {layer} has per-domain Q/K/V: a head's weights are not one slice")
    if not isinstance(head, int) or not 0 <= head < attn.n_heads:
        raise ValueError(f"head must be an integer in [0, {attn.n_heads - 1}] in layer {layer}; got {head!r}")
    rows = slice(head * attn.d_head, (head + 1) * attn.d_head)
    prefix = f"blocks.{layer}.attn."
    masks = {}
    for proj in ("q_proj", "k_proj", "v_proj"):
        for kind in ("weight", "bias"):
            mask = torch.zeros_like(getattr(getattr(attn, proj), kind), dtype=torch.bool)
            mask[rows] = True
            masks[f"{prefix}{proj}.{kind}"] = mask
    mask = torch.zeros_like(attn.out_proj.weight, dtype=torch.bool)
    mask[:, rows] = True
    masks[f"{prefix}out_proj.weight"] = mask
    return masks


def next_token_loss(net: nn.Module, input_ids: Tensor) -> Tensor:
    """Per-token next-token cross-entropy `[batch, seq - 1]` (devinterp's `loss_fn` contract)."""
    logits = net(input_ids).logits[:, :-1]
    return torch.nn.functional.cross_entropy(logits.transpose(1, 2), input_ids[:, 1:], reduction="none")


CLASSIFIER_HEADER = 2  # a packed classifier row: [label, length, ids padded to the longest]


def classifier_rows(examples: Sequence[tuple[Sequence[int], int]], pad_id: int = 0) -> Tensor:
    """`[n, 2 + L]` int64 rows `[label, length, ids..., pad...]` from (token ids, label) examples: devinterp
    samples token rows only, so a classifier's example travels as one row and `classification_loss` unpacks it."""
    if not examples:
        raise ValueError("no examples to pack")
    width = max(len(ids) for ids, *_ in examples)
    rows = torch.full((len(examples), CLASSIFIER_HEADER + width), pad_id, dtype=torch.long)
    for i, (ids, label, *_) in enumerate(examples):
        rows[i, 0], rows[i, 1] = int(label), len(ids)
        rows[i, CLASSIFIER_HEADER:CLASSIFIER_HEADER + len(ids)] = torch.as_tensor(list(ids), dtype=torch.long)
    return rows


def classification_loss(net: nn.Module, rows: Tensor) -> Tensor:
    """Each packed example's cross-entropy, repeated over its row `[batch, width - 1]` (devinterp's
    per-token contract): the mean over positions, what devinterp records, is the example's loss."""
    ids = rows[:, CLASSIFIER_HEADER:]
    mask = torch.arange(ids.size(1), device=rows.device)[None, :] < rows[:, 1:2]
    loss = torch.nn.functional.cross_entropy(net(ids, mask).logits, rows[:, 0], reduction="none")
    return loss[:, None].expand(-1, rows.size(1) - 1)


def loss_for(net: nn.Module):
    """The loss devinterp samples with: a classifier's (its config has `n_classes`) or next-token."""
    return classification_loss if hasattr(getattr(net, "config", None), "n_classes") else next_token_loss


def without_dropout(net: nn.Module) -> nn.Module:
    """A copy of `net` with every dropout rate 0: devinterp samples in train mode, and the LLC is a
    property of the deterministic loss (the classifier's default dropout 0.1 would add its own noise)."""
    if not any(isinstance(m, nn.Dropout) and m.p > 0 for m in net.modules()) and \
            not any(getattr(m, "attn_dropout", 0) for m in net.modules()):
        return net
    net = copy.deepcopy(net)
    for module in net.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
        if getattr(module, "attn_dropout", 0):
            module.attn_dropout = 0.0
    return net


class _TokenRows(Dataset):
    """`[n, seq]` token ids as devinterp's `{"input_ids": [seq]}` rows."""

    def __init__(self, tokens: Tensor) -> None:
        self.tokens = tokens

    def __len__(self) -> int:
        return self.tokens.size(0)

    def __getitem__(self, i: int) -> dict[str, Tensor]:
        return {"input_ids": self.tokens[i]}


def stack_tokens(batches: Tensor | Iterable, max_sequences: int | None = None) -> Tensor:
    """`[n, seq]` int64 token ids from a tensor or a loader of next-token batches (tensors or dicts
    with `input_ids`), at most `max_sequences` of them."""
    if isinstance(batches, Tensor):
        tokens = batches
    else:
        parts, n = [], 0
        for batch in batches:
            ids = batch["input_ids"] if isinstance(batch, dict) else batch
            parts.append(ids)
            n += ids.size(0)
            if max_sequences is not None and n >= max_sequences:
                break
        if not parts:
            raise ValueError("the loader gave no batches")
        tokens = torch.cat(parts)
    if tokens.dim() != 2 or tokens.size(1) < 2 or tokens.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"expected integer token ids [n, seq >= 2]; got {tuple(tokens.shape)} {tokens.dtype}")
    return tokens[:max_sequences].long().cpu()


def estimate_llc(net: nn.Module, batches: Tensor | Iterable, settings: SGLDSettings | None = None, *,
                 layer: int = WHOLE_MODEL, head: int = WHOLE_MODEL) -> LLCEstimate:
    """The whole model's LLC (layer = head = -1), or head (layer, head)'s refined LLC, on `batches`
    (an LM's token ids `[n, seq]` or a loader of next-token batches; a classifier's `classifier_rows`).
    `net` is not changed (devinterp samples a copy, without dropout); sampling runs on the network's device."""
    try:
        from devinterp.slt.sampling import sample
    except ImportError as error:
        raise ImportError(f"the LLC needs devinterp ({error}): pip install 'headlab[llc]'") from error

    settings = settings or SGLDSettings()
    tokens = stack_tokens(batches)
    if tokens.size(0) < settings.batch_size:
        raise ValueError(f"llc.batch_size={settings.batch_size} is more than the {tokens.size(0)} sequences given")
    whole = (layer, head) == (WHOLE_MODEL, WHOLE_MODEL)
    masks = None if whole else head_param_masks(net, layer, head)
    loss_fn, net = loss_for(net), without_dropout(net)
    device = str(next(net.parameters()).device)
    start = time.perf_counter()
    gc.freeze()  # devinterp runs gc.collect() around every chain: ~1 s each over a big heap, ~0.01 s frozen
    try:
        with tempfile.TemporaryDirectory(prefix="headlab-llc-") as tmp:
            samples = sample(net, _TokenRows(tokens), {}, lr=settings.lr, n_beta=settings.nbeta, param_masks=masks,
                             num_chains=settings.chains, num_draws=settings.draws, num_burnin_steps=settings.burnin,
                             batch_size=settings.batch_size, num_init_loss_batches=max(1, tokens.size(0) // settings.batch_size),
                             init_seed=settings.seed, localization=settings.localization, device=device,
                             output_path=Path(tmp) / "samples.zarr", loss_fn=loss_fn)
            data = samples.dataset
            trace = data.sampling_loss_micro.mean(dim=["batch_sampling", "token_pos"]).values.astype(np.float64)
            init_loss = float(data.init_loss.values.mean())
            step_ids = torch.from_numpy(data.sampling_input_ids_micro.isel(chain=0).values)  # [step, batch, seq]
    finally:
        gc.unfreeze()
    reference = _reference_trace(net, step_ids, loss_fn)
    return _summarise("llc" if whole else "rllc", layer, head, trace, reference, init_loss, settings,
                      time.perf_counter() - start)


@torch.no_grad()
def _reference_trace(net: nn.Module, step_ids: Tensor, loss_fn=next_token_loss, chunk: int = 1024) -> np.ndarray:
    """`[step]` loss at the trained weights on each SGLD step's batch (every chain sees the same
    batches: devinterp's `match_sampling_input_ids_across_chains`), in the sampler's train mode."""
    was_training = net.training
    net.train()
    try:
        device = next(net.parameters()).device
        flat = step_ids.reshape(-1, step_ids.size(-1))
        losses = torch.cat([loss_fn(net, part.to(device)).mean(dim=1).cpu() for part in flat.split(chunk)])
    finally:
        net.train(was_training)
    return losses.view(step_ids.size(0), step_ids.size(1)).mean(dim=1).double().numpy()


def _summarise(metric: str, layer: int, head: int, trace: np.ndarray, reference: np.ndarray, init_loss: float,
               settings: SGLDSettings, seconds: float) -> LLCEstimate:
    """The estimates over the draws after burn-in, and each chain's drift over the last half of them."""
    draws = trace[:, settings.burnin:]
    excess = (trace - reference)[:, settings.burnin:]
    per_chain = settings.nbeta * (draws.mean(axis=1) - init_loss)
    paired = settings.nbeta * excess.mean(axis=1)
    drift, drift_p = np.array([_drift(chain) for chain in excess]).T
    settled = (np.abs(drift) <= settings.flat_tolerance) | (drift_p >= settings.trend_alpha)
    flat = bool(np.all(np.isfinite(paired)) and np.all(settled))
    return LLCEstimate(metric, layer, head, float(paired.mean()), _std(paired), paired, float(per_chain.mean()),
                       _std(per_chain), init_loss, trace, reference, drift, drift_p, flat, settings, seconds)


def _std(values: np.ndarray) -> float:
    return float(values.std(ddof=1)) if values.size > 1 else math.nan


def _drift(excess: np.ndarray) -> tuple[float, float]:
    """(drift, p-value of its slope) of one chain: the slope of the last half of its excess loss
    times the half's length, over the chain's mean excess."""
    half = excess[len(excess) // 2:]
    if not np.all(np.isfinite(half)):
        return math.nan, math.nan
    fit = stats.linregress(np.arange(half.size), half)
    elevation = excess.mean()
    return (float(fit.slope * half.size / elevation) if elevation > 0 else math.inf), float(fit.pvalue)


def estimate_head_llcs(net: nn.Module, batches: Tensor | Iterable, settings: SGLDSettings | None = None, *,
                       heads: Sequence[tuple[int, int]] | None = None, whole_model: bool = True) -> list[LLCEstimate]:
    """The whole model's LLC (unless `whole_model=False`) and the refined LLC of every head (or of
    `heads`, (layer, head) pairs), all with the same settings and seed, on the same token ids."""
    tokens = stack_tokens(batches)
    if heads is None:
        heads = [(layer, head) for layer, block in enumerate(net.blocks) for head in range(block.attn.n_heads)]
    found = [estimate_llc(net, tokens, settings)] if whole_model else []
    return found + [estimate_llc(net, tokens, settings, layer=layer, head=head) for layer, head in heads]


def llc_rows(step: int, estimates: Sequence[LLCEstimate]) -> pd.DataFrame:
    """Tidy rows, one per estimate (`ROW_COLUMNS`); the whole-model row has layer = head = -1. `value`
    (the paired estimate, mean over chains) is what head_metrics.parquet gets as metric `llc` / `rllc`."""
    return pd.DataFrame([{"step": int(step), "layer": e.layer, "head": e.head, "metric": e.metric, "value": e.value,
                          "std": e.std, "n_chains": e.n_chains, "devinterp_value": e.devinterp_value,
                          "max_abs_drift": float(np.max(np.abs(e.drift))), "flat": e.flat} for e in estimates],
                        columns=list(ROW_COLUMNS))


def head_metric_frame(run_id: str, step: int, epoch: int, estimates: Sequence[LLCEstimate]) -> pd.DataFrame:
    """The heads' estimates as head_metrics.parquet rows (`HEAD_METRIC_COLUMNS`): `rllc` (the value) and
    `rllc_std` (over chains) per head. The whole model's `llc` is left out: it is no head's, and the tools
    that read that table take every (layer, head) in it for a head (`llc_rows` keeps it, at -1, -1)."""
    records = [(str(run_id), int(step), int(epoch), e.layer, e.head, name, value)
               for e in estimates if e.metric == "rllc" for name, value in ((e.metric, e.value), (f"{e.metric}_std", e.std))]
    frame = pd.DataFrame(records, columns=list(HEAD_METRIC_COLUMNS))
    return frame.astype({"step": "int64", "epoch": "int64", "layer": "int64", "head": "int64", "value": "float64"})
