"""What a case asks an implementation to build: :class:`RopeConfig`, one rotary embedding in plain
fields (no spec string), the form an adapter maps onto its runtime's own configuration.

Conventions (lexkit's, stated once; ``docs/conformance.md`` has the table):

* pairs are (i, i + r/2), "rotate-half" (Llama/HF), unless ``pairs="interleaved"`` (2i, 2i + 1: the
  x, q and k of rotate and scores hold them so); r = ``rotary_dims`` = 2·floor(fraction·h/2),
  the first r dimensions of each head are rotated, the other h - r pass through unchanged;
* θ_i = base^(-2i/r), i = 0 .. r/2 - 1, then the scaling (``positions/scaling.py``, LongRoPE in
  ``positions/longrope.py``); the attention factor a multiplies cos and sin;
* the current length of a call, read by ``dynamic`` and ``longrope``, is max(position) + 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

#: the scalings a config may name (``none`` is plain RoPE)
SCALINGS = ("none", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope")
#: YaRN's parameters beside factor and length (positions/scaling.py)
YARN_KEYS = ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate")
#: the ones past β: an adapter whose runtime takes none of them answers n/a for a config that sets one
YARN_EXTRA = YARN_KEYS[2:]
#: the rotary schemes: RoPE, xPos (RoPE times a decay), ReRoPE (relative position clamped past w)
SCHEMES = ("rope", "xpos", "rerope")


@dataclass(frozen=True)
class RopeConfig:
    """One rotary embedding. ``None`` for a method parameter means the method's default (YaRN β_fast
    32, β_slow 1; Llama 3 low 1, high 4), as in HF's configs.

    A hybrid model (layers of different types with their own RoPE, e.g. OLMo 3's sliding layers
    unscaled beside YaRN full layers) is given as ``layers``: every layer type's own config, and
    ``layer_type`` names the one whose embedding the case asks for. An adapter that builds a
    model-level embedding reads ``layers``; one that builds a layer's embedding reads the fields,
    which are those of ``layers[layer_type]``."""

    head_dim: int = 64
    base: float = 10000.0
    scaling: str = "none"
    factor: float | None = None
    original_len: int | None = None
    fraction: float = 1.0
    beta_fast: float | None = None
    beta_slow: float | None = None
    attention_factor: float | None = None  # yarn: a given (default: from s, mscale, mscale_all_dim)
    mscale: float | None = None  # yarn, DeepSeek: a = m(s, mscale)/m(s, mscale_all_dim) when both are set
    mscale_all_dim: float | None = None
    truncate: bool | None = None  # yarn: round the ramp's ends (None: true; gpt-oss false)
    low_freq: float | None = None
    high_freq: float | None = None
    short_factor: tuple[float, ...] | None = None
    long_factor: tuple[float, ...] | None = None
    scheme: str = "rope"
    gamma: float = 0.4  # xpos: ζ_i = (2i + γr)/((1 + γ)r)
    scale_base: float = 512.0  # xpos: B
    decay: bool = True  # xpos: false is RoPE
    window: int | None = None  # rerope: w
    leak: float = math.inf  # rerope: k (inf: ReRoPE; finite: leaky ReRoPE)
    dtype: torch.dtype = torch.float32  # the model's dtype: of the tables, and of x, q, k given to rotate/scores
    #: how x, q and k given to rotate and scores hold their pairs: "half" (i, i + r/2), rotate-half (Llama/HF), or
    #: "interleaved" (2i, 2i + 1) (GPT-J, torchtune, x-transformers); an adapter computes in the layout it declares
    pairs: str = "half"
    #: the context the runtime is allocated for (vLLM's ``max_model_len``, llama.cpp's ``n_ctx``), where it reads
    #: one; None: the runtime's own default. Nothing of the reference reads it: LongRoPE and dynamic NTK choose
    #: by each call's length
    context: int | None = None
    layer_type: str | None = None
    layers: tuple[tuple[str, RopeConfig], ...] = field(default=(), compare=False)
    #: the hybrid model the layers are of (``olmo3``, ``gemma3``): a model-level adapter builds its classes
    model: str | None = None

    @property
    def rotary_dims(self) -> int:
        """r = 2·floor(fraction·h/2), the rotated dimensions of each head."""
        return 2 * int(self.fraction * self.head_dim / 2)

    def layer(self, layer_type: str) -> RopeConfig:
        """The config of another layer type of the same hybrid model."""
        for name, cfg in self.layers:
            if name == layer_type:
                return replace(cfg, layer_type=name, layers=self.layers, model=self.model)
        raise KeyError(f"no layer type {layer_type!r}; the model has {', '.join(n for n, _ in self.layers)}")

    def describe(self) -> str:
        """A short human form: ``yarn s=4 L=4096 h=128 base=1e4`` (the fields that differ from defaults)."""
        parts = [self.scheme if self.scheme != "rope" else "", self.scaling if self.scaling != "none" else ""]
        for key, label in (("factor", "s"), ("original_len", "L")):
            if getattr(self, key) is not None:
                parts.append(f"{label}={getattr(self, key):g}")
        parts += [f"h={self.head_dim}", f"base={self.base:g}"]
        if self.fraction != 1.0:
            parts.append(f"fraction={self.fraction:g}")
        for key in ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "low_freq", "high_freq",
                    "window"):
            if getattr(self, key) is not None:
                parts.append(f"{key}={getattr(self, key):g}")
        if self.truncate is not None:
            parts.append(f"truncate={str(self.truncate).lower()}")
        if self.scheme == "xpos" and not self.decay:
            parts.append("decay=false")
        if self.scheme == "rerope" and math.isfinite(self.leak):
            parts.append(f"k={self.leak:g}")
        if self.dtype != torch.float32:
            parts.append(str(self.dtype).removeprefix("torch."))
        if self.pairs != "half":
            parts.append(f"pairs={self.pairs}")
        if self.context is not None:
            parts.append(f"context={self.context}")
        if self.layer_type:
            parts.append(f"layer={self.layer_type}")
        return " ".join(p for p in parts if p)


def hybrid(layer_type: str, model: str | None = None, **layers: RopeConfig) -> RopeConfig:
    """The config of ``layer_type`` in a ``model`` whose layer types have the ``layers`` configs."""
    pairs = tuple((name, replace(cfg, layer_type=None, layers=(), model=None)) for name, cfg in layers.items())
    return RopeConfig(layers=pairs, model=model).layer(layer_type)
