"""A causal LM run's head table in the classifier's terms: `role` rows derived from the LM scores.

An LM run measures previous-token, duplicate and induction scores per head (lit.callbacks.lm_metrics)
but no `role` metric; the sweep tables (bifurcation steps, final and acquired roles, seed matching
and kappa) read `role`. Deriving it where the runs are read lets every sweep analysis, and the
claims that read them, take LM sweeps as they take classifier sweeps, old LM runs included.
"""

from __future__ import annotations

import pandas as pd
import torch

from headlab.analysis.lm_heads import LM_PATTERN_SCORES, lm_role_ids
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
