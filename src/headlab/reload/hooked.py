"""A trained headlab language model handed to TransformerLens, weights and all.

Why: TransformerLens' tools (`detect_head`, activation patching, `run_with_cache`, circuit
analysis) then run on a run's own weights unchanged, and every number headlab reports on an LM can
be checked against theirs. headlab's `HeadlabLM` already keeps TransformerLens' layouts
(`head_weights()`: W_Q `[head, d_model, d_head]`, W_O `[head, d_head, d_model]`), so the hand-off
is a copy, no re-derivation: token and position embeddings, per-head W_Q/W_K/W_V/W_O and biases,
LayerNorms (or none), the MLP when the model has one, and the unembedding (bias 0; a tied
unembedding is copied as the `W_E^T / sqrt(d_model)` headlab uses). Position encodings: `learned`,
`sinusoidal` (its fixed table becomes `W_pos`) and `none` (`W_pos` = 0) map to TransformerLens'
`standard`; `rope` to `rotary` (rotate-half, base 10000, as headlab's); `alibi` to `alibi`.

transformer_lens is an optional extra (`pip install -e .[tl]`), imported only when called.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from headlab.errors import HeadlabError
from headlab.model.lm import HeadlabLM, LMConfig
from headlab.reload.network import load_network
from headlab.store import RunDir

TL_POSITIONS = {"learned": "standard", "sinusoidal": "standard", "none": "standard", "rope": "rotary", "alibi": "alibi"}


def to_hooked_transformer(source: HeadlabLM | str | os.PathLike, device: str = "cpu") -> Any:
    """A TransformerLens `HookedTransformer` (eval mode) computing what the LM computes.

    source: a trained `HeadlabLM`, a run directory (its `checkpoints/last.ckpt`) or a checkpoint file.
    """
    transformer_lens = _import_transformer_lens()
    net = _network(source)
    with torch.random.fork_rng(devices=[]):  # building the model must not move the caller's RNG
        model = transformer_lens.HookedTransformer(hooked_config(net.config, transformer_lens.HookedTransformerConfig))
    state = hooked_state_dict(net)
    params = dict(model.named_parameters())
    if set(params) != set(state):  # a TransformerLens parameter this hand-off does not know: fail, never leave it random
        raise HeadlabError(f"to_hooked_transformer: parameters differ from this TransformerLens version's "
                           f"(unmapped {sorted(set(params) - set(state))}, unknown {sorted(set(state) - set(params))})")
    with torch.no_grad():
        for name, value in state.items():
            params[name].copy_(value)
    model = model.to(device, print_details=False).eval()
    if net.config.pos_encoding == "alibi":  # a plain attribute, not a buffer: set on the model's device
        _use_headlab_alibi_slopes(model, net, device)
    return model


def hooked_config(config: LMConfig, config_class: Any) -> Any:
    """The `HookedTransformerConfig` of the LM `config` (`config_class`: transformer_lens' class)."""
    return config_class(
        n_layers=config.n_layers, d_model=config.d_model, n_ctx=config.max_len, d_head=config.head_dim,
        n_heads=config.n_heads, d_vocab=config.vocab_size, d_vocab_out=config.vocab_size,
        attn_only=config.attn_only, d_mlp=None if config.attn_only else (config.d_ff or 4 * config.d_model),
        act_fn=None if config.attn_only else "gelu",  # nn.GELU(): the exact erf form, TransformerLens' "gelu"
        normalization_type="LN" if config.layer_norm else None, eps=1e-5,  # nn.LayerNorm's eps
        positional_embedding_type=TL_POSITIONS[config.pos_encoding], rotary_base=10000, rotary_adjacent_pairs=False,
        init_weights=False, default_prepend_bos=False, device="cpu", dtype=torch.float32,
    )


def hooked_state_dict(net: HeadlabLM) -> dict[str, Tensor]:
    """The LM's weights under TransformerLens' parameter names and layouts (copies, float32, CPU)."""
    config = net.config
    state = {"embed.W_E": net.W_E, "unembed.W_U": net.W_U, "unembed.b_U": torch.zeros(config.vocab_size)}
    if config.pos_encoding != "rope":  # TransformerLens keeps a (never added) W_pos under alibi too: 0 there
        state["pos_embed.W_pos"] = _position_table(net)
    for i, block in enumerate(net.blocks):
        weights = block.attn.head_weights()
        for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"):
            state[f"blocks.{i}.attn.{name}"] = getattr(weights, name)
        norms = {"ln1": block.ln_1} if config.attn_only else {"ln1": block.ln_1, "ln2": block.ln_2}
        if config.layer_norm:
            state.update({f"blocks.{i}.{key}.{p}": getattr(norm, attr) for key, norm in norms.items()
                          for p, attr in (("w", "weight"), ("b", "bias"))})
        if block.mlp is not None:
            state.update({f"blocks.{i}.mlp.W_in": block.mlp.fc.weight.T, f"blocks.{i}.mlp.b_in": block.mlp.fc.bias,
                          f"blocks.{i}.mlp.W_out": block.mlp.proj.weight.T, f"blocks.{i}.mlp.b_out": block.mlp.proj.bias})
    if config.layer_norm:
        state.update({"ln_final.w": net.ln_f.weight, "ln_final.b": net.ln_f.bias})
    return {name: value.detach().to("cpu", torch.float32).clone() for name, value in state.items()}


def _use_headlab_alibi_slopes(model: Any, net: HeadlabLM, device: str) -> None:
    """TransformerLens' slopes are 2^(-8(h+1)/n) for every n; headlab's (Press et al.'s reference
    code) differ when n is not a power of two. Its cached bias `attn.alibi [head, q, k]` is set from
    headlab's slopes over the whole context, so it is never rebuilt from its own."""
    n_ctx = net.config.max_len
    distance = torch.arange(n_ctx)[None, :] - torch.arange(n_ctx)[:, None]  # [q, k]: k - q
    for block, ours in zip(model.blocks, net.blocks):
        if not hasattr(block.attn, "alibi"):
            raise HeadlabError("to_hooked_transformer: this TransformerLens version keeps no attn.alibi bias "
                               "to set headlab's ALiBi slopes in")
        slopes = ours.attn.alibi_slopes.detach().cpu().float()
        bias = slopes[:, None, None] * distance.clamp(max=0).float()  # -slope (q - k) at and below the diagonal
        block.attn.alibi = bias.to(device)


def _position_table(net: HeadlabLM) -> Tensor:
    """`W_pos [max_len, d_model]`: what the embedding-level encoding adds at each position."""
    zeros = torch.zeros(1, net.config.max_len, net.config.d_model, device=net.W_E.device)
    with torch.no_grad():
        return net.pos_enc(zeros)[0]


def _network(source: HeadlabLM | str | os.PathLike) -> HeadlabLM:
    if isinstance(source, torch.nn.Module):
        net = source
    else:
        path = Path(source).expanduser()
        if path.is_dir():
            checkpoint = RunDir(path).existing_last_checkpoint()
            if checkpoint is None:
                raise HeadlabError(f"to_hooked_transformer: {path} has no checkpoints/last.ckpt (a run directory "
                                   "of a finished headlab-train experiment=induction run, or a .ckpt file)")
            path = checkpoint
        net = load_network(path)
    if not isinstance(net, HeadlabLM):
        raise HeadlabError(f"to_hooked_transformer: {type(net).__name__} is not a causal language model "
                           "(only runs of experiment=induction, a HeadlabLM, map onto a HookedTransformer)")
    return net


def _import_transformer_lens() -> Any:
    try:
        import transformer_lens
    except ImportError:
        raise HeadlabError("to_hooked_transformer needs TransformerLens: pip install -e '.[tl]' "
                           "(or pip install 'transformer-lens>=2.16,<4')") from None
    return transformer_lens
