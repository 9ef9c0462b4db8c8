"""Language-model head scores: previous-token, duplicate-token, induction, OV copying, ICL.

The pattern scores are TransformerLens' `head_detector` definitions (error measure "mul"), so a
number here is the number `detect_head` gives on the same attention: per sequence, the share of a
head's attention mass that lies on the target pattern, `sum(A * P) / sum(A)`, after the BOS column
(`exclude_bos`) and the diagonal (`exclude_current_token`) of A are set to 0; then the mean over
sequences. Target patterns `P [q, k]` (lower-triangular, 0/1):

- previous token: P[i, i-1] = 1;
- duplicate token: P[i, j] = 1 for j < i with tokens[j] == tokens[i];
- induction (prefix matching): P[i, j] = 1 for 1 <= j <= i with tokens[j-1] == tokens[i], j-1 < i:
  the token right after an earlier copy of the current one.

Sums per chunk (`lm_pattern_score_sums`) let a probe stream through in chunks, as the other
metrics do. `repeated_stripe_score_sums` is the standard fixed-distance test's induction score, on
repeated random tokens without a gap. The copying score is Olsson et al.'s (2022): of the eigenvalues of a head's full OV
circuit W_E W_V W_O W_U, sum(lambda) / sum(|lambda|): 1 when the head copies the attended token's
logit up, -1 when it suppresses it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from headlab.analysis.roles import ROLES
from headlab.errors import DataError

LM_PATTERN_SCORES = ("prev_token_score", "duplicate_score", "induction_score")


def previous_token_pattern(tokens: Tensor) -> Tensor:
    """`[batch, seq]` -> `[batch, q, k]`: 1 at (i, i-1)."""
    batch, seq = _check_tokens(tokens).shape
    return torch.ones(seq, seq).tril(-1).triu(-1).expand(batch, seq, seq).contiguous()


def duplicate_token_pattern(tokens: Tensor) -> Tensor:
    """`[batch, seq]` -> `[batch, q, k]`: 1 at (i, j), j < i, where token j equals token i."""
    tokens = _check_tokens(tokens)
    same = tokens[:, :, None] == tokens[:, None, :]  # [batch, q, k]
    return same.float().tril(-1)


def induction_pattern(tokens: Tensor) -> Tensor:
    """`[batch, seq]` -> `[batch, q, k]`: 1 at (i, j), 1 <= j <= i, where token j-1 equals token i
    and j-1 < i (TransformerLens' shifted duplicate pattern)."""
    duplicate = duplicate_token_pattern(tokens)
    shifted = torch.zeros_like(duplicate)
    shifted[:, :, 1:] = duplicate[:, :, :-1]  # key j <- the duplicate at key j-1
    return shifted.tril()


PATTERNS = {"prev_token_score": previous_token_pattern, "duplicate_score": duplicate_token_pattern,
            "induction_score": induction_pattern}


def lm_pattern_score_sums(pattern: Tensor, tokens: Tensor, *, exclude_bos: bool = True,
                          exclude_current_token: bool = True) -> dict[str, Tensor]:
    """Per-head sums over the chunk's sequences of each score in `LM_PATTERN_SCORES`, `[head]` each
    (float64), plus `n_sequences` (a 0-d tensor): divide to get the probe's scores.

    pattern: `[batch, head, q, k]` post-softmax (causal); tokens: `[batch, seq]`, every position real.
    """
    if not isinstance(pattern, Tensor) or pattern.ndim != 4 or not pattern.is_floating_point():
        got = list(pattern.shape) if isinstance(pattern, Tensor) else type(pattern).__name__
        raise DataError("pattern", f"expected a float tensor [batch, head, q, k], got {got}")
    tokens = _check_tokens(tokens)
    batch, _, q, k = pattern.shape
    if q != k or tuple(tokens.shape) != (batch, q):
        raise DataError("tokens", f"expected [batch, seq] = {[batch, q]} matching the square pattern "
                                  f"{list(pattern.shape)}, got {list(tokens.shape)}")
    attention = pattern.detach().to(torch.float64).clone()
    if exclude_bos:
        attention[..., 0] = 0
    if exclude_current_token:
        attention.diagonal(dim1=-2, dim2=-1).zero_()
    total = attention.sum(dim=(-2, -1))  # [batch, head]
    sums: dict[str, Tensor] = {}
    for name, build in PATTERNS.items():
        target = build(tokens.cpu()).to(attention.device, torch.float64)[:, None]  # [batch, 1, q, k]
        on_target = (attention * target).sum(dim=(-2, -1))
        sums[name] = (on_target / total).sum(dim=0)
    sums["n_sequences"] = torch.tensor(float(batch), dtype=torch.float64)
    return sums


CAUSAL_ENTROPY = "causal_entropy_norm"


def causal_entropy_norm_sums(pattern: Tensor) -> Tensor:
    """Per-head sum over the chunk's sequences of the normalised attention entropy under the causal
    mask, `[head]` (float64): per query i >= 1, -sum_j A_ij log A_ij / log(i + 1) (query i sees the
    i + 1 keys 0..i, BOS included), averaged over the queries. 1 for uniform attention over the
    keys a query sees, 0 for a head on one key (a BOS sink or a previous-token head).

    This is DESIGN's `entropy_norm` with the causal mask's key count; it carries its own name so
    the classifier descriptor metrics that read `entropy_norm` (sweep matching, bifurcation) do
    not start reading it in LM runs. pattern: `[batch, head, q, k]` post-softmax, q = k.
    """
    if not isinstance(pattern, Tensor) or pattern.ndim != 4 or pattern.size(-1) != pattern.size(-2) or pattern.size(-1) < 2:
        got = list(pattern.shape) if isinstance(pattern, Tensor) else type(pattern).__name__
        raise DataError("pattern", f"expected a float tensor [batch, head, q, k] with q = k >= 2, got {got}")
    a = pattern.detach().to(torch.float64)
    entropy = -torch.xlogy(a, a).sum(-1)[..., 1:]  # [batch, head, q - 1]: queries 1.. (query 0 sees one key)
    n_keys = torch.arange(2, a.size(-1) + 1, device=a.device, dtype=torch.float64)
    return (entropy / n_keys.log()).mean(-1).sum(0)


def lm_pattern_scores(pattern: Tensor, tokens: Tensor, **options: bool) -> dict[str, Tensor]:
    """Each score of `LM_PATTERN_SCORES`, `[head]`: the mean over the batch's sequences."""
    sums = lm_pattern_score_sums(pattern, tokens, **options)
    n = sums.pop("n_sequences")
    return {name: value / n for name, value in sums.items()}


def repeated_stripe_score_sums(pattern: Tensor, half_len: int) -> Tensor:
    """The standard induction test's score, summed over the chunk's sequences, `[head]` (float64).

    On repeated random tokens `[BOS, block, block]` (block of `half_len`, no gap: Olsson et al.'s
    test, TransformerLens' Main_Demo `induction_score_hook`), an induction head at query i of the second
    block attends key i - half_len + 1, the token after the earlier copy: the diagonal at offset
    1 - half_len. Per sequence, the mean of that stripe over the second block's queries; the demo's
    diagonal also counts the one or two first-block queries that have no earlier copy (a perfect head
    scores half_len / (half_len + 2) there, 1 here). Attention is not renormalised (BOS counts).

    pattern: `[batch, head, q, k]` with q = k = 1 + 2 * half_len.
    """
    if not isinstance(pattern, Tensor) or pattern.ndim != 4 or tuple(pattern.shape[-2:]) != (1 + 2 * half_len,) * 2:
        got = list(pattern.shape) if isinstance(pattern, Tensor) else type(pattern).__name__
        raise DataError("pattern", f"expected [batch, head, q, k] with q = k = 1 + 2 * half_len = {1 + 2 * half_len}, "
                                   f"got {got}")
    queries = torch.arange(half_len + 1, 2 * half_len + 1, device=pattern.device)
    stripe = pattern[:, :, queries, queries - half_len + 1]  # [batch, head, half_len]
    return stripe.detach().double().mean(-1).sum(0)


def ov_copying_score(W_E: Tensor, W_V: Tensor, W_O: Tensor, W_U: Tensor) -> Tensor:
    """Olsson et al.'s copying score of each head's OV circuit, `[head]` in [-1, 1].

    W_E `[vocab, d_model]`, W_V `[head, d_model, d_head]`, W_O `[head, d_head, d_model]`,
    W_U `[d_model, vocab]`. The non-zero eigenvalues of W_E W_V W_O W_U (`[vocab, vocab]`) are those
    of W_O W_U W_E W_V (`[d_head, d_head]`), so the small product is the one decomposed.
    """
    if W_V.ndim != 3 or W_O.ndim != 3 or W_E.ndim != 2 or W_U.ndim != 2:
        raise DataError("OV weights", "expected W_E [vocab, d_model], W_V [head, d_model, d_head], "
                                      "W_O [head, d_head, d_model], W_U [d_model, vocab]")
    W_E, W_V, W_O, W_U = (w.detach().double() for w in (W_E, W_V, W_O, W_U))
    small = W_O @ (W_U @ W_E)[None] @ W_V  # [head, d_head, d_head]
    eigenvalues = torch.linalg.eigvals(small)  # [head, d_head]
    return eigenvalues.real.sum(-1) / eigenvalues.abs().sum(-1).clamp(min=torch.finfo(torch.float64).tiny)


def per_position_loss(logits: Tensor, tokens: Tensor) -> Tensor:
    """Next-token cross-entropy at each position, `[batch, seq - 1]` (position t predicts token t+1)."""
    if logits.ndim != 3 or tuple(logits.shape[:2]) != tuple(tokens.shape):
        raise DataError("logits", f"expected [batch, seq, vocab] over tokens {list(tokens.shape)}, got {list(logits.shape)}")
    return torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2).float(), tokens[:, 1:], reduction="none")


def icl_differences(loss_by_position: Tensor, late: int, early: int) -> Tensor:
    """Per sequence, the loss at token index `late` minus at `early`, `[batch]`: the in-context-learning
    score of each sequence, whose mean is `icl_score` and whose spread gives its standard error."""
    if loss_by_position.ndim != 2 or not 0 <= early < late < loss_by_position.size(1):
        raise DataError("icl_score", f"expected [batch, seq - 1] losses and 0 <= early < late < seq - 1, got "
                                     f"{list(loss_by_position.shape)}, early={early}, late={late}")
    return loss_by_position[:, late] - loss_by_position[:, early]


def icl_score(loss_by_position: Tensor, late: int, early: int) -> float:
    """Olsson et al.'s in-context-learning score: mean loss at token index `late` minus at `early`
    (negative: later tokens are predicted better, i.e. the model uses its context).

    loss_by_position: `[seq - 1]` or `[batch, seq - 1]`, index t = the loss of predicting token t+1.
    """
    losses = loss_by_position if loss_by_position.ndim == 1 else loss_by_position.mean(0)
    if not 0 <= early < late < losses.numel():
        raise DataError("icl_score", f"expected 0 <= early < late < {losses.numel()}, got early={early}, late={late}")
    return float(losses[late] - losses[early])


def _check_tokens(tokens: Tensor) -> Tensor:
    if not isinstance(tokens, Tensor) or tokens.ndim != 2 or tokens.is_floating_point():
        got = list(tokens.shape) if isinstance(tokens, Tensor) else type(tokens).__name__
        raise DataError("tokens", f"expected an integer tensor [batch, seq], got {got}")
    return tokens


LM_ROLES = {"prev_token_score": "previous", "duplicate_score": "duplicate", "induction_score": "induction"}
LM_ROLE_THRESHOLD = 0.4


# The LM roles under the shared role names (analysis.roles.ROLES): a previous-token head is the
# classifier's `previous_token`; a head no pattern claims is `mixed`, the name of "no rule fired".
LM_ROLE_NAMES = {"previous": "previous_token", "duplicate": "duplicate", "induction": "induction", "other": "mixed"}


def lm_role_ids(scores: Tensor, threshold: float = LM_ROLE_THRESHOLD) -> Tensor:
    """`[..., 3]` scores in `LM_PATTERN_SCORES` order -> `[...]` role ids into `analysis.roles.ROLES`
    (float64, NaN where a score is NaN): `lm_roles`' rule, vectorised, for sweep tables and role
    timelines that read LM and classifier runs alike."""
    if scores.shape[-1] != len(LM_PATTERN_SCORES):
        raise DataError("scores", tuple(scores.shape), f"a last dimension of {len(LM_PATTERN_SCORES)} ({', '.join(LM_PATTERN_SCORES)})")
    scores = scores.double()
    ids = torch.tensor([float(ROLES.index(LM_ROLE_NAMES[LM_ROLES[name]])) for name in LM_PATTERN_SCORES], dtype=torch.float64)
    best, which = scores.nan_to_num(-1.0).max(dim=-1)
    out = torch.where(best >= threshold, ids[which], torch.tensor(float(ROLES.index(LM_ROLE_NAMES["other"])), dtype=torch.float64))
    return out.masked_fill(scores.isnan().any(dim=-1), float("nan"))


def lm_roles(scores: dict[str, Tensor], threshold: float = LM_ROLE_THRESHOLD) -> list[str]:
    """The LM role of each head of a layer: the pattern (previous / duplicate / induction) holding
    the largest share of its attention if that share is >= `threshold`, else `other`. A share of
    0.4 is far above chance on the probe (a uniform head puts ~1/seq on any one target) and below
    the 0.5 the issue's done-criterion asks of an induction head, so that head is named one."""
    names = list(LM_ROLES)
    stacked = torch.stack([scores[name].double() for name in names])  # [3, head]
    best, which = stacked.max(dim=0)
    return [LM_ROLES[names[i]] if b >= threshold else "other" for b, i in zip(best.tolist(), which.tolist())]
