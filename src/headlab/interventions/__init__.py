"""Interventions on heads: what each head is worth (ablation, gradient importance), and pruning.

Pure functions over a network and evaluation batches (tensors in, tensors out; no Lightning, no
files): `single_head_ablation`, `gradient_importance`, `leave_one_layer_in`, `keep_top_k`,
`random_scores`. The command lines (`headlab-importance`, `headlab-prune`) are thin wrappers.
"""

from headlab.interventions.ablation import AblationResult, keep_top_k, leave_one_layer_in, rank_heads, single_head_ablation
from headlab.interventions.batches import evaluate_gated, heads_per_layer, live_mask
from headlab.interventions.gradient import gradient_importance, normalize_layers
from headlab.interventions.importance import HEAD_IMPORTANCE, IMPORTANCE_CURVES, RANKINGS, HeadImportance, curve_rows, importance_rows, measure_importance
from headlab.interventions.ranking import heads_for_share, random_scores
from headlab.interventions.scores import Scores, ScoreTally, accuracy, macro_f1

__all__ = [
    "HEAD_IMPORTANCE",
    "HeadImportance",
    "IMPORTANCE_CURVES",
    "RANKINGS",
    "curve_rows",
    "importance_rows",
    "measure_importance",
    "AblationResult",
    "ScoreTally",
    "Scores",
    "accuracy",
    "evaluate_gated",
    "gradient_importance",
    "heads_for_share",
    "heads_per_layer",
    "keep_top_k",
    "leave_one_layer_in",
    "live_mask",
    "macro_f1",
    "normalize_layers",
    "random_scores",
    "rank_heads",
    "single_head_ablation",
]
