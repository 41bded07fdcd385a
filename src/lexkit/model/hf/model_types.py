"""Which transformers model types lexkit runs, and what every layer of one is.

A :class:`ModelType` says how a model type holds positions and which per-layer rules it has; from a
config, :func:`layers_of` reads each layer into a :class:`lexkit.layouts.Layer` of a layer stack, as a
byte run's layout holds them (docs/layouts.md): its transformers layer type, its position scheme,
its own mask as a lexkit pattern, and what the model adds around attention as lexkit's modifiers
(Llama 4's query temperature ``llama4``, GPT-OSS's ``sink`` logit, Gemma's ``softcap``). The mask
functions registered with transformers check every
layer against this reading on every forward pass (:mod:`lexkit.model.hf.interface`), so a rule read
wrong here is an error, never a silent run.

The per-layer rules, from transformers 5.24's modelling code:

* ``layer_types[i]``: ``full_attention`` (causal), ``sliding_attention`` (``window:W``,
  W = ``sliding_window``: W keys including the query, as lexkit's window), ``chunked_attention``
  (``chunk:C``, C = ``attention_chunk_size``). Without ``layer_types`` every layer is full, or
  sliding when the config has a ``sliding_window`` (Mistral).
* RoPE on every layer, except where its model type says (``rope_layers``): Llama 4 and SmolLM3 rotate
  the layers whose ``no_rope_layers[i]`` is 1 (the name reads backwards), Cohere 2 its sliding
  layers only (EXAONE 4 too when it has a window). Gemma 3 and OLMo 3 have RoPE parameters per
  layer type (``rope_parameters[layer_type]``).
* Llama 4 scales the queries of its NoPE layers by 1 + β·ln(⌊(m+1)/F⌋ + 1)
  (``attn_temperature_tuning``, β = ``attn_scale``, F = ``floor_scale``) before attention: lexkit's
  ``llama4`` temperature, applied by the model, so lexkit's kernels do not apply it again.
* GPT-OSS adds a learned sink logit per head (``sinks``, passed to attention as ``s_aux``);
  Gemma 2 (and Gemma 3 when set) soft-caps the attention logits (``attn_logit_softcapping``,
  passed as ``softcap``). Both run in lexkit's kernels.
"""

from __future__ import annotations

import dataclasses

from ...attention import create as create_pattern
from ...attention import modifiers as mods
from ...core.errors import LexkitError
from ...core.specs import spec_number
from ...layouts import Layer, canonical
from ...positions.scaling import HF_KEYS, hf_rope_type, lexkit_method


@dataclasses.dataclass(frozen=True)
class ModelType:
    """How one transformers model type holds positions and runs attention."""

    positions: str  # "rope", "learned" or "alibi"
    interface: bool  # attention goes through AttentionInterface (lexkit's kernels)
    #: which layers apply RoPE: "all", "no_rope_layers" (1 = uses RoPE), "sliding" (the window layers) or
    #: "sliding_or_all" (the window layers when the config has a window, else all: EXAONE 4)
    rope_layers: str = "all"
    temperature: bool = False  # NoPE layers scale their queries (Llama 4's attn_temperature_tuning)
    sinks: bool = False  # a learned sink logit per head on every layer (GPT-OSS)
    softcap: bool = False  # attention logit soft-capping from attn_logit_softcapping (Gemma)


MODEL_TYPES = {
    "llama": ModelType("rope", True),
    "mistral": ModelType("rope", True),
    "qwen2": ModelType("rope", True),
    "gpt_neox": ModelType("rope", True),
    "gpt2": ModelType("learned", True),
    "bloom": ModelType("alibi", False),
    "gemma2": ModelType("rope", True, softcap=True),
    "gemma3_text": ModelType("rope", True, softcap=True),
    "gpt_oss": ModelType("rope", True, sinks=True),
    "llama4_text": ModelType("rope", True, rope_layers="no_rope_layers", temperature=True),
    "cohere2": ModelType("rope", True, rope_layers="sliding"),
    "smollm3": ModelType("rope", True, rope_layers="no_rope_layers"),
    "qwen3": ModelType("rope", True),
    # the same per-layer rules in other model types whose attention goes through the interface
    "mixtral": ModelType("rope", True),
    "phi3": ModelType("rope", True),
    "starcoder2": ModelType("rope", True),
    "qwen2_moe": ModelType("rope", True),
    "qwen3_moe": ModelType("rope", True),
    "olmo3": ModelType("rope", True),
    "exaone4": ModelType("rope", True, rope_layers="sliding_or_all"),
    "vaultgemma": ModelType("rope", True, softcap=True),
    "gemma": ModelType("rope", True),
    "olmo2": ModelType("rope", True),
    "granite": ModelType("rope", True),
    "cohere": ModelType("rope", True),
}

#: transformers' layer type -> the config field that sizes its mask (None: causal)
MASKS = {"full_attention": None, "sliding_attention": "sliding_window", "chunked_attention": "attention_chunk_size"}
PATTERN_OF = {"sliding_attention": "window", "chunked_attention": "chunk"}


def require_model_type(config) -> ModelType:
    """The :class:`ModelType` of ``config``'s model type, or a LexkitError naming the supported ones."""
    mtype = MODEL_TYPES.get(config.model_type)
    if mtype is None:
        raise LexkitError(f"model type {config.model_type!r} is not supported; supported: {', '.join(MODEL_TYPES)}")
    return mtype


def layer_types(config) -> list[str]:
    """transformers' type of every layer: ``config.layer_types``, else all full attention (all
    sliding when the config has a ``sliding_window``, as Mistral applies it to every layer)."""
    n = config.num_hidden_layers
    types = getattr(config, "layer_types", None)
    if types is None:
        return ["sliding_attention" if getattr(config, "sliding_window", None) else "full_attention"] * n
    types = list(types)[:n]
    unknown = sorted(set(types) - set(MASKS))
    if unknown:
        raise LexkitError(f"{config.model_type}: layer type {unknown[0]!r} is not attention lexkit can run; "
                          f"it runs {', '.join(MASKS)}")
    return types


def own_pattern(config, layer_type: str) -> str:
    """The lexkit pattern spec of a layer type's own mask: ``causal``, ``window:W``, ``chunk:C``."""
    field = MASKS[layer_type]
    if field is None:
        return "causal"
    size = getattr(config, field, None)
    if not size:
        raise LexkitError(f"{config.model_type}: a {layer_type} layer needs {field} in its config")
    return f"{PATTERN_OF[layer_type]}:{int(size)}"


def uses_rope(config, mtype: ModelType, types: list[str]) -> list[bool]:
    """Which layers the model rotates (see the module docstring)."""
    if mtype.positions != "rope":
        return [False] * len(types)
    if mtype.rope_layers == "no_rope_layers":
        return [bool(flag) for flag in config.no_rope_layers[: len(types)]]
    if mtype.rope_layers == "sliding" or (mtype.rope_layers == "sliding_or_all" and config.sliding_window):
        return [t == "sliding_attention" for t in types]
    return [True] * len(types)


def rope_parameters(config, layer_type: str | None = None) -> dict:
    """The RoPE parameters (theta and scaling) of a layer type: transformers 5's ``rope_parameters``
    (one dict, or one per layer type: Gemma 3), 4.x's ``rope_theta`` and ``rope_scaling``."""
    params = dict(getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {})
    if layer_type is not None and isinstance(params.get(layer_type), dict):
        params = dict(params[layer_type])
    params.setdefault("rope_theta", getattr(config, "rope_theta", 10000.0))
    return params


def per_type_rope(config) -> bool:
    """Whether the config holds RoPE parameters per layer type (Gemma 3)."""
    params = getattr(config, "rope_parameters", None) or {}
    return any(isinstance(params.get(t), dict) for t in MASKS)


def rope_scheme(params: dict) -> str:
    """``rope:base=10000``, ``rope:base=150000,scaling=yarn,factor=32``: a layer's RoPE in the words
    of lexkit's ``rope`` scheme (its base and scaling; the exact frequencies are the model's)."""
    out = f"rope:base={spec_number(params[HF_KEYS['base']])}"
    kind = lexkit_method(params.get("rope_type", params.get("type", hf_rope_type("none"))))
    if kind != "none":
        out += f",scaling={kind}" + (f",factor={spec_number(params['factor'])}" if "factor" in params else "")
    return out


def layers_of(config, mtype: ModelType) -> list[Layer]:
    """Every layer of a model with this config (see the module docstring), as the layers of a layer stack."""
    types = layer_types(config)
    rope = uses_rope(config, mtype, types)
    tuning = mtype.temperature and getattr(config, "attn_temperature_tuning", False)
    softcap = getattr(config, "attn_logit_softcapping", None) if mtype.softcap else None
    out = []
    for layer_type, rotated in zip(types, rope):
        if rotated:
            scheme = rope_scheme(rope_parameters(config, layer_type))
        else:
            scheme = {"rope": "none", "learned": "learned", "alibi": "alibi"}[mtype.positions]
        modifiers: list[mods.Modifier] = []
        if tuning and not rotated:
            modifiers.append(mods.Llama4(beta=float(config.attn_scale), floor=int(config.floor_scale)))
        if mtype.sinks:
            modifiers.append(mods.Sink())
        if softcap is not None:
            modifiers.append(mods.SoftCap(C=float(softcap)))
        out.append(Layer(scheme, create_pattern(own_pattern(config, layer_type)), tuple(modifiers), layer_type))
    return out


def layout_text(layers: list[Layer]) -> str:
    """Every layer written as a layout (docs/layouts.md): the shortest period that repeats to all
    the layers as ``(...)xN`` (Gemma 2: ``(A;B)x13``), runs of equal layers as ``(A)x5``."""
    n = len(layers)
    for period in range(1, n // 2 + 1):
        if n % period == 0 and all(layers[i] == layers[i % period] for i in range(n)):
            inner = canonical(layers[:period])
            return f"({inner})x{n // period}" if period > 1 else canonical(layers)
    return canonical(layers)
