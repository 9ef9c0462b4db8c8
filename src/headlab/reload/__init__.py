"""A finished run rebuilt from its directory, for the tools that compute on it (importance, pruning,
per-domain roles, distillation's teacher): its saved config checked as data, its datamodule, its
network from a checkpoint (checked against the config), its evaluation batches, and `predict` on new texts.

Layer 2 (beside measure/ and interventions/): it needs model/, data/ and store/, and every workflow
of layer 3 may use it, so none of them reaches sideways into another for it.
"""

from headlab.reload.inputs import (build_datamodule, eval_batches, is_language_model, load_matching_network,
                                   run_config)
from headlab.reload.hooked import to_hooked_transformer
from headlab.reload.network import load_network, save_pruned
from headlab.reload.new_texts import Prediction, Predictor, predict, tokenize

__all__ = ["build_datamodule", "eval_batches", "is_language_model", "load_matching_network", "load_network",
           "predict", "Prediction", "Predictor", "run_config", "save_pruned", "to_hooked_transformer",
           "tokenize"]
