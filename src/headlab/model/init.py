"""Weight initialisation, chosen so `init_scale` moves the Q/K/V projections and nothing else.

- Q/K/V weights: Xavier-uniform with gain = init_scale, applied *per head*: each head's
  `[d_model -> d_head]` block is initialised with fan_in = d_model, fan_out = d_head, i.e. bound
  `init_scale * sqrt(6 / (d_model + d_head))`. Per head rather than over the whole
  `[d_model -> n_heads*d_head]` matrix so that a head's scale does not depend on how many other
  heads there are: changing n_heads at fixed d_head leaves every head's init distribution alone.
- out_proj, MLP and classifier weights: Xavier-uniform with gain 1 (not PyTorch's default
  Kaiming-uniform(a=sqrt(5)), whose scale depends on fan_in only), fixed across init_scale sweeps.
- Every Linear bias: 0. Embeddings (token, learned position): N(0, 1) (PyTorch's default), the
  padding row 0. Not GPT-2's N(0, 0.02): next to a sinusoidal table of amplitude 1 that leaves
  token identity ~3% of the residual stream at init, and the synthetic task's letter-matching
  features then never get learned (measured: stuck at 77% vs 97-99% in ~1,000 steps with N(0, 1)).
- LayerNorm: weight 1, bias 0.
"""

from __future__ import annotations

from torch import nn

from headlab.errors import ConfigError
from headlab.model.attention import MultiHeadSelfAttention


def init_weights(model: nn.Module, init_scale: float) -> None:
    """Initialise every submodule of `model` in place (deterministic under torch.manual_seed)."""
    if not init_scale > 0:
        raise ConfigError("model.init_scale", init_scale, "a number > 0")
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight, gain=1.0)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            _init_embedding(module)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
    for module in model.modules():  # second pass: overrides the generic Q/K/V init above
        if isinstance(module, MultiHeadSelfAttention):
            _init_qkv(module, init_scale)


EMBEDDING_STD = 1.0


def _init_embedding(embedding: nn.Embedding) -> None:
    nn.init.normal_(embedding.weight, mean=0.0, std=EMBEDDING_STD)
    if embedding.padding_idx is not None:
        embedding.weight.data[embedding.padding_idx].zero_()


def _init_qkv(attn: MultiHeadSelfAttention, gain: float) -> None:
    for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
        for head_block in proj.weight.data.view(attn.n_heads, attn.d_head, attn.d_model):  # [d_head, d_model]
            nn.init.xavier_uniform_(head_block, gain=gain)  # fan_in = d_model, fan_out = d_head
