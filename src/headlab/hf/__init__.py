"""Pretrained Hugging Face encoders and decoders, and checkpoint suites, measured like headlab's own models.

`load_model` loads a local folder offline and safely with eager attention; `HFModel` (alias
`HFEncoder`) puts any family of `headlab.hf.families` (BERT, RoBERTa, DistilBERT, ELECTRA, GPT-2,
GPT-NeoX, Llama) behind the measurement seam's named points (`blocks[i].attn.hook_pattern`,
`hook_z`) with per-head gates before the output projection; `headlab.hf.suite` reads checkpoint
suites (seeds x steps) into a sweep-shaped folder; `HFClassifier` adds a linear head so `headlab.interventions`
(ablation, gradient importance) scores its heads; `analyze` measures it on a probe set and writes the run contract.

    from headlab.hf import AnalyzeSettings, HFEncoder, analyze, load_encoder, resolve_model_path
    model, tokenizer = load_encoder(resolve_model_path("minilm", None))
    net = HFEncoder(model)
    summary = analyze(net, tokenizer, AnalyzeSettings(source="en_polarity"), run_dir)
"""

from headlab.hf.adapter import EncoderOutput, HFEncoder, HFHeadAttention, HFModel
from headlab.hf.classifier import HFClassifier, fit_linear_head, mean_pool
from headlab.hf.analyze import AnalyzeSettings, analyze, layer_means
from headlab.hf.loading import load_encoder, load_model, minilm_path, resolve_model_path
from headlab.hf.probe import HFProbe, encode_probe, punctuation_ids
from headlab.hf.texts import SOURCES, load_texts

__all__ = [
    "AnalyzeSettings",
    "EncoderOutput",
    "HFClassifier",
    "HFEncoder",
    "HFHeadAttention",
    "HFModel",
    "HFProbe",
    "SOURCES",
    "analyze",
    "encode_probe",
    "fit_linear_head",
    "layer_means",
    "load_encoder",
    "load_model",
    "load_texts",
    "mean_pool",
    "minilm_path",
    "punctuation_ids",
    "resolve_model_path",
]
