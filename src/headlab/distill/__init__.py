"""Attention distillation: losses between teacher and student heads, and which heads to pair.

Pure tensor functions (no Lightning, no files): `attention_kl` (MiniLM), `score_mse` (TinyBERT),
`value_relation`; `layer_map` (uniform | last | first_middle | explicit), `mean_head_groups` and
`relation_heads` (MiniLMv2) for different head counts; `transfer` combines them into one step's
loss terms. `DistillModule` (Lightning, `headlab-distill`) trains a student with them (docs/distill.md).
"""

from headlab.distill.losses import attention_kl, score_mse, value_relation
from headlab.distill.maps import LAYER_MAPS, layer_map, mean_head_groups, relation_heads

__all__ = ["LAYER_MAPS", "attention_kl", "layer_map", "mean_head_groups", "relation_heads", "score_mse",
           "value_relation"]
