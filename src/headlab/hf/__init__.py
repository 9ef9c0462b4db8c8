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

import sys
import types
from importlib import import_module
from typing import Any

# name -> the module defining it, imported on first use (PEP 562): `headlab.hf.suite` (a dry run of the
# suites scale, the suite files) does not pay for transformers and torch's model code
_WHERE = {
    "EncoderOutput": "adapter", "HFEncoder": "adapter", "HFHeadAttention": "adapter", "HFModel": "adapter",
    "HFClassifier": "classifier", "fit_linear_head": "classifier", "mean_pool": "classifier",
    "AnalyzeSettings": "analyze", "analyze": "analyze", "layer_means": "analyze",
    "load_encoder": "loading", "load_model": "loading", "minilm_path": "loading", "resolve_model_path": "loading",
    "HFProbe": "probe", "encode_probe": "probe", "punctuation_ids": "probe",
    "SOURCES": "texts", "load_texts": "texts",
}


class _Package(types.ModuleType):
    """Keeps `headlab.hf.analyze` the function, as the eager imports left it: importing the submodule of
    the same name would otherwise set the package's attribute to that module."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _WHERE and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'headlab.hf' has no attribute {name!r}")
    value = getattr(import_module(f"headlab.hf.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


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
