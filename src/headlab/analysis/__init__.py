"""Pure functions on attention patterns and per-head weights (torch/numpy/scipy only).

Works on attention from any model: headlab's own or a Hugging Face one. Metrics reduce each
probe chunk to per-head sums (the `*_sums` functions), so accumulators never hold all maps.
"""

from headlab.analysis.attention_metrics import (
    METRIC_NAMES,
    AttentionMetricAccumulator,
    MetricSums,
    attention_metric_sums,
    attention_metrics,
)
from headlab.analysis.bifurcation import metric_bifurcation_steps, role_bifurcation_steps
from headlab.analysis.head_matching import HeadMatch, descriptor_distances, match_heads
from headlab.analysis.head_similarity import (
    JS_SMOOTHING,
    HeadSimilarityAccumulator,
    SimilaritySums,
    head_similarity,
    head_similarity_sums,
)
from headlab.analysis.init_orthogonality import CosineSummary, InitGeometry, cosine_summary, init_geometry
from headlab.analysis.lm_heads import (
    LM_PATTERN_SCORES,
    icl_differences,
    icl_score,
    lm_pattern_score_sums,
    lm_pattern_scores,
    ov_copying_score,
    per_position_loss,
    repeated_stripe_score_sums,
)
from headlab.analysis.mean_pattern import MeanPatternAccumulator, PatternSums, mean_pattern, mean_pattern_sums
from headlab.analysis.movement_importance import Correlation, movement_importance_correlation
from headlab.analysis.probe_layer import LayerSums, ProbeLayerAccumulator, probe_layer_sums
from headlab.analysis.roles import (
    REQUIRED_METRICS,
    ROLE_METRICS,
    ROLES,
    RoleThresholds,
    classify_roles,
    role_ids,
)
from headlab.analysis.position import PositionAccumulator, PositionSums, position_sums
from headlab.analysis.weight_similarity import (
    head_cosine,
    per_head_grad_norm,
    qk_cosine,
    random_cosine_std,
    relative_distance_from_init,
    subspace_similarity,
)

__all__ = [
    "LM_PATTERN_SCORES",
    "icl_differences",
    "icl_score",
    "lm_pattern_score_sums",
    "lm_pattern_scores",
    "ov_copying_score",
    "per_position_loss",
    "repeated_stripe_score_sums",
    "METRIC_NAMES",
    "AttentionMetricAccumulator",
    "MetricSums",
    "attention_metric_sums",
    "attention_metrics",
    "JS_SMOOTHING",
    "HeadSimilarityAccumulator",
    "SimilaritySums",
    "head_similarity",
    "head_similarity_sums",
    "MeanPatternAccumulator",
    "PatternSums",
    "mean_pattern",
    "mean_pattern_sums",
    "LayerSums",
    "ProbeLayerAccumulator",
    "probe_layer_sums",
    "REQUIRED_METRICS",
    "ROLES",
    "ROLE_METRICS",
    "RoleThresholds",
    "classify_roles",
    "PositionAccumulator",
    "PositionSums",
    "position_sums",
    "role_ids",
    "head_cosine",
    "per_head_grad_norm",
    "qk_cosine",
    "random_cosine_std",
    "relative_distance_from_init",
    "subspace_similarity",
    "metric_bifurcation_steps",
    "role_bifurcation_steps",
    "HeadMatch",
    "descriptor_distances",
    "match_heads",
    "CosineSummary",
    "InitGeometry",
    "cosine_summary",
    "init_geometry",
    "Correlation",
    "movement_importance_correlation",
]
