"""The model: an encoder classifier whose attention heads can be measured, gated and pruned."""

from headlab.model.attention import AttentionOutput, HeadWeights, MultiHeadSelfAttention
from headlab.model.config import ModelConfig
from headlab.model.encoder import ClassifierOutput, HeadlabClassifier, count_parameters
from headlab.model.posenc import POS_ENCODINGS

__all__ = [
    "AttentionOutput",
    "ClassifierOutput",
    "HeadWeights",
    "HeadlabClassifier",
    "ModelConfig",
    "MultiHeadSelfAttention",
    "POS_ENCODINGS",
    "count_parameters",
]
