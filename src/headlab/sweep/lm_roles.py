"""A causal LM run's head table in the classifier's terms: `role` rows derived from the LM scores,
and each head's pattern type in the founding article's three (C2).

An LM run measures previous-token, duplicate and induction scores per head (lit.callbacks.lm_metrics)
but no `role` metric; the sweep tables (bifurcation steps, final and acquired roles, seed matching
and kappa) read `role`. Deriving it where the runs are read lets every sweep analysis, and the
claims that read them, take LM sweeps as they take classifier sweeps, old LM runs included.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from headlab.analysis.lm_heads import CAUSAL_ENTROPY, LM_PATTERN_SCORES, LM_ROLE_THRESHOLD, lm_role_ids
from headlab.analysis.roles import ROLES, RoleThresholds
from headlab.errors import DataError
from headlab.store.tables import ROLE_NAME, with_role_names

ROLE_METRIC = "role"  # the head table's role metric (ids into analysis.roles.ROLES)


def with_lm_roles(head_metrics: pd.DataFrame | None) -> pd.DataFrame | None:
    """`head_metrics` plus one `role` row per (step, layer, head) where all LM pattern scores were
    measured; unchanged when the run has its own `role` rows or no LM scores."""
    if head_metrics is None or head_metrics.empty:
        return head_metrics
    measured = set(head_metrics["metric"].unique())
    if ROLE_METRIC in measured or not set(LM_PATTERN_SCORES) <= measured:
        return head_metrics
    keys = [c for c in head_metrics.columns if c not in ("metric", "value", ROLE_NAME)]
    scores = head_metrics[head_metrics["metric"].isin(LM_PATTERN_SCORES)]
    wide = scores.pivot_table(index=keys, columns="metric", values="value", aggfunc="last").dropna()
    ids = lm_role_ids(torch.tensor(wide[list(LM_PATTERN_SCORES)].to_numpy(dtype="float64")))
    roles = wide.index.to_frame(index=False).assign(metric=ROLE_METRIC, value=ids.numpy())
    out = pd.concat([head_metrics, roles.reindex(columns=head_metrics.columns)], ignore_index=True)
    return with_role_names(out) if ROLE_NAME in out.columns else out  # the derived rows named like stored ones


# ---- the article's three pattern types (C2, section 1.1) ----------------------------------------
# 「局部对角线带状结构」 a local diagonal band, 「远离对角线的离散亮点」 discrete bright points far from the
# diagonal, 「均匀分布」 a uniform spread; a head none of them describes is untyped.
LOCAL_DIAGONAL, DISTANT_POINTS, UNIFORM, UNTYPED = "local_diagonal", "distant_points", "uniform", "untyped"
LM_PATTERN_TYPES = (LOCAL_DIAGONAL, DISTANT_POINTS, UNIFORM)
LM_TYPE_METRICS = (*LM_PATTERN_SCORES, CAUSAL_ENTROPY)  # what the rule reads, per head
# the classifier rule's `broad` bar: uniform attention over a fraction f of n keys has normalised
# entropy 1 + log f / log n, so 0.85 is an even spread over more than half the keys at n = 32
UNIFORM_ENTROPY = RoleThresholds().broad_entropy_norm
TYPE_OF_ROLE = {"previous_token": LOCAL_DIAGONAL, "induction": DISTANT_POINTS, "duplicate": DISTANT_POINTS}


def lm_pattern_types(scores: np.ndarray, entropy: np.ndarray, threshold: float = LM_ROLE_THRESHOLD,
                     uniform_entropy: float = UNIFORM_ENTROPY) -> list[str]:
    """One type per head from `scores [head, 3]` (`LM_PATTERN_SCORES` order) and its causal
    normalised entropy `entropy [head]`, first rule that holds:

    1. `local_diagonal`: the LM role rule names it previous-token (the previous-token share is the
       largest and >= `threshold`, 0.4): a fixed offset of -1, the band next to the diagonal
       (Clark et al. 2019's positional heads, Kovaleva et al. 2019's diagonal pattern);
    2. `distant_points`: the LM role rule names it induction or duplicate: >= 0.4 of its attention
       on earlier keys picked by token identity, points wherever the copy lies, on the probe about
       half a sequence from the diagonal (Kovaleva's heterogeneous / Clark's content heads);
    3. `uniform`: neither, and its normalised entropy is >= `uniform_entropy`, 0.85 (Clark's broad
       heads, Kovaleva's block/uniform pattern);
    4. `untyped`: anything else (e.g. a BOS sink: low entropy on no pattern), or a NaN score.

    The patterns come first: a head with 0.4 of its mass on one key can still reach 0.85 on
    short queries, and a head that holds a pattern is that pattern's type. A uniform spread needs
    no learning (a head with zero queries is exactly uniform), so the two pattern types are the ones
    that show training split the heads; the induction LM's heads measure 0.68-0.75 at init
    (exploratory seeds 400-401, step 0), below the uniform bar.
    """
    scores, entropy = np.asarray(scores, dtype=np.float64), np.asarray(entropy, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[1] != len(LM_PATTERN_SCORES) or entropy.shape != scores.shape[:1]:
        raise DataError("scores", f"expected [head, {len(LM_PATTERN_SCORES)}] scores and [head] entropies, "
                                  f"got {list(scores.shape)} and {list(entropy.shape)}")
    roles = lm_role_ids(torch.tensor(scores), threshold).numpy()
    types = []
    for role, h in zip(roles, entropy):
        if not np.isfinite(role) or not np.isfinite(h):
            types.append(UNTYPED)
        elif ROLES[int(role)] in TYPE_OF_ROLE:
            types.append(TYPE_OF_ROLE[ROLES[int(role)]])
        else:
            types.append(UNIFORM if h >= uniform_entropy else UNTYPED)
    return types


def final_lm_types(final: pd.DataFrame) -> pd.Series:
    """Each head's pattern type (`lm_pattern_types`) from `final` (`[layer, head] x metric` at the
    run's last measurement, `sweep.matching.final_values`); all NaN when the run lacks a metric the
    rule reads (a classifier run, or an LM run measured before the causal entropy was)."""
    if final.empty or not set(LM_TYPE_METRICS) <= set(final.columns):
        return pd.Series(np.nan, index=final.index, dtype=object)
    types = lm_pattern_types(final[list(LM_PATTERN_SCORES)].to_numpy(float), final[CAUSAL_ENTROPY].to_numpy(float))
    return pd.Series(types, index=final.index, dtype=object)
