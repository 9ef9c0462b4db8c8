"""The model's typed configuration: Hydra composes and instantiates it, model code only reads it.

Every field is checked when the dataclass is built, so a bad sweep value fails at start-up with
the key as the user writes it (`model.n_heads=3`), not as a shape error deep in a forward.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Real
from typing import Any, Literal, get_args

from headlab.errors import ConfigError
from headlab.model.domains import ROUTERS, Router
from headlab.model.posenc import POS_ENCODINGS, PosEncoding
from headlab.model.templates import MODES as TEMPLATE_MODES
from headlab.model.templates import TemplateMode
from headlab.model.templates import resolve_template

Pooling = Literal["cls", "mean"]
POOLINGS: tuple[str, ...] = get_args(Pooling)


@dataclass
class ModelConfig:
    vocab_size: int
    n_classes: int
    max_len: int
    n_layers: int = 2
    n_heads: int = 4
    d_model: int = 128
    # None: d_model // n_heads (a fixed parameter budget shared by the heads);
    # set: each head gets d_head, the attention inner width is n_heads * d_head.
    d_head: int | None = None
    d_ff: int | None = None  # None: 4 * d_model
    dropout: float = 0.1
    attn_dropout: float = 0.0  # > 0 makes SDPA fall back to its slow kernel on CPU
    pos_encoding: PosEncoding = "sinusoidal"
    pooling: Pooling = "cls"
    causal: bool = False
    init_scale: float = 1.0  # Xavier gain of the Q/K/V projections only
    pad_id: int = 0
    # Attention templates (headlab.model.templates): a preset name or one pattern name per
    # (layer, head); `hard`: the head's pattern is the template (its V/O still train); `soft`:
    # template_weight * KL(template || head) joins the loss, falling to 0 over template_anneal_steps
    # (0: constant); `free`: checked but not applied, so one sweep can compare free / soft / hard.
    template: str | list[list[str]] | None = None
    template_mode: TemplateMode = "hard"
    template_weight: float = 1.0
    template_anneal_steps: int = 0
    # Per-domain Q/K/V (headlab.model.domains): the first domain_split_layers layers keep one Q/K/V
    # per domain (0: all shared, today's network). n_domains comes from the data (None: not known
    # yet, as when the config is checked before the data loads; 0: the data has no domain ids).
    domain_split_layers: int = 0
    n_domains: int | None = None
    # none: each example's domain id picks its pipeline; soft: a learned router mixes them
    # (softmax from the pooled layer input), so no domain id is needed at val/test.
    domain_router: Router = "none"
    # soft router only: weight of KL(mean router load || uniform), averaged over the split layers,
    # added to the training loss (train/router_balance); 0: no term (headlab.model.domains).
    domain_router_balance: float = 0.0

    def __post_init__(self) -> None:
        self._check_sizes()
        self._check_choices()
        self._check_geometry()
        self._check_template()
        self._check_domains()

    @property
    def templates(self) -> list[list[str]] | None:
        """The template as one pattern name per (layer, head), presets resolved; None: no template
        (or template_mode=free, which checks the template but applies none)."""
        templates = resolve_template(self.template, self.n_layers, self.n_heads)
        return None if self.template_mode == "free" else templates

    @property
    def head_dim(self) -> int:
        """d_head as resolved: the set value, or d_model // n_heads."""
        return self.d_model // self.n_heads if self.d_head is None else self.d_head

    @property
    def d_attn(self) -> int:
        """Width of the concatenated heads, the input of out_proj."""
        return self.n_heads * self.head_dim

    @property
    def ff_dim(self) -> int:
        return 4 * self.d_model if self.d_ff is None else self.d_ff

    def _check_sizes(self) -> None:
        for key, minimum in (("vocab_size", 4), ("n_classes", 2), ("max_len", 2), ("n_layers", 1),
                             ("n_heads", 1), ("d_model", 1)):
            _require_int(key, getattr(self, key), minimum)
        for key in ("d_head", "d_ff"):
            if getattr(self, key) is not None:
                _require_int(key, getattr(self, key), 1)
        _require_int("pad_id", self.pad_id, 0)
        if self.pad_id >= self.vocab_size:
            raise ConfigError("model.pad_id", self.pad_id, f"an id < model.vocab_size={self.vocab_size}")

    def _check_choices(self) -> None:
        for key in ("dropout", "attn_dropout"):
            value = getattr(self, key)
            if not _is_real(value) or not 0.0 <= value < 1.0:
                raise ConfigError(f"model.{key}", value, "a probability in [0, 1)")
        if not _is_real(self.init_scale) or not self.init_scale > 0:
            raise ConfigError("model.init_scale", self.init_scale, "a number > 0")
        if self.pos_encoding not in POS_ENCODINGS:
            raise ConfigError("model.pos_encoding", self.pos_encoding, f"one of {', '.join(POS_ENCODINGS)}")
        if self.pooling not in POOLINGS:
            raise ConfigError("model.pooling", self.pooling, f"one of {', '.join(POOLINGS)}")
        if not isinstance(self.causal, bool):
            raise ConfigError("model.causal", self.causal, "true or false")

    def _check_geometry(self) -> None:
        if self.d_head is None and self.d_model % self.n_heads:
            raise ConfigError(
                "model.n_heads", self.n_heads,
                f"a divisor of d_model={self.d_model} when d_head is null (n_heads={self.n_heads} does not "
                f"divide d_model={self.d_model}); either set model.d_head or choose n_heads that divides d_model",
            )
        if self.pos_encoding == "rope" and self.head_dim % 2:
            key, value = ("model.d_head", self.d_head) if self.d_head is not None else ("model.n_heads", self.n_heads)
            raise ConfigError(
                key, value,
                f"an even head dimension for pos_encoding=rope; got head_dim={self.head_dim} "
                f"(d_model={self.d_model}, n_heads={self.n_heads}, d_head={self.d_head})",
            )


    def _check_template(self) -> None:
        if self.template_mode not in TEMPLATE_MODES:
            raise ConfigError("model.template_mode", self.template_mode, f"one of {', '.join(TEMPLATE_MODES)}")
        templates = self.templates  # raises ConfigError for a wrong shape or an unknown pattern
        if not _is_real(self.template_weight) or not self.template_weight >= 0:
            raise ConfigError("model.template_weight", self.template_weight, "a number >= 0")
        _require_int("template_anneal_steps", self.template_anneal_steps, 0)
        if self.causal and templates and any(name in ("next", "last") for row in templates for name in row):
            raise ConfigError("model.template", self.template, "no next or last pattern in a causal model (they look ahead)")

    def _check_domains(self) -> None:
        _require_int("domain_split_layers", self.domain_split_layers, 0)
        if self.domain_split_layers > self.n_layers:
            raise ConfigError("model.domain_split_layers", self.domain_split_layers,
                              f"an integer in [0, n_layers={self.n_layers}]")
        if self.n_domains is not None:
            _require_int("n_domains", self.n_domains, 0)
            if self.domain_split_layers and self.n_domains == 0:
                raise ConfigError("model.domain_split_layers", self.domain_split_layers,
                                  "0 for data without domain ids (use data=multidomain, or data=files with a domain column)")
        if self.domain_router not in ROUTERS:
            raise ConfigError("model.domain_router", self.domain_router, f"one of {', '.join(ROUTERS)}")
        if self.domain_router != "none" and self.domain_split_layers == 0:
            raise ConfigError("model.domain_router", self.domain_router, "none while model.domain_split_layers=0 (nothing to route)")
        if not _is_real(self.domain_router_balance) or not self.domain_router_balance >= 0:
            raise ConfigError("model.domain_router_balance", self.domain_router_balance, "a number >= 0")
        if self.domain_router_balance > 0 and self.domain_router != "soft":
            raise ConfigError("model.domain_router_balance", self.domain_router_balance,
                              "0 unless model.domain_router=soft (only a router has a load to balance)")


def _is_real(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _require_int(key: str, value: Any, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"model.{key}", value, f"an integer >= {minimum}")
