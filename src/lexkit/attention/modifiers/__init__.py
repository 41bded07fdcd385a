"""Layer modifiers: what a layer does besides its position scheme and its pattern, each a registered
class in a room of its own (:mod:`.base` has the interface and the places a modifier acts at).

Named in a layout after ``+`` (``none@causal+logn``, ``rope@window:16+shift:0.25``) and parsed by
:func:`parse`, which pins every parameter that defaults to the training length. Registered in this
order, which is also the canonical order of a layer's modifiers (and the order a layer applies
those of one place): the temperatures (``logn``, ``llama4``, ``ssmax``), ``sink``, ``shift``,
``softcap``, the attention variants (``diff``, ``stickbreak``, ``topk``, ``selective``, ``entmax``,
``chunks``: one a layer), then the mechanisms since 2024: ``conv`` (Canon layers), ``kshift`` (FoX's key/value
shift), ``gate`` (Qwen's gated attention), and the temperatures ``sit`` (scale-invariant
attention), ``fitted`` (DroPE's) and ``adaptive`` (from the attention's entropy); then the nanoGPT
speedrun's ``keyoffset`` (the last dims of each key from the position before; its window temperature
0.2·ln(n/L) + 1 is ``fitted:c=0.2``), and ASEntmax's length scale ``asscale`` (a temperature).
``@lexkit.attention.modifiers.register`` adds a user's own (``--import MODULE``).
"""

from __future__ import annotations

from ...core.registry import Registry
from ...core.specs import describe_params, parse_params, split_spec
from .adaptive import Adaptive, adaptive_beta, adaptive_rows
from .asscale import ASScale, as_scale
from .base import PLACES, Modifier, Scoring, Shape, rows
from .chunks import Chunks, chunk_weights
from .conv import Conv, causal_conv
from .differential import Differential
from .entmax import Entmax, entmax_weights
from .fitted import Fitted, fitted_scale
from .gate import Gate, gated
from .keyoffset import KeyOffset, offset_keys
from .kshift import KShift, mix_previous
from .selective import Selective, selective_weights
from .shift import DEFAULT_SHIFT, Shift, check_width, shift_width, token_shift
from .sink import Sink
from .sit import ScaleInvariant, sit_terms
from .softcap import SoftCap, soft_cap
from .stickbreak import StickBreaking, stick_breaking
from .temperature import Llama4, LogN, SSMax, Temperature, logn_scale
from .topk import TopK, top_k_weights


def _check(cls: type[Modifier]) -> None:
    if cls.place not in PLACES:
        raise ValueError(f"modifier {cls.name}: place {cls.place!r} is not one of {', '.join(PLACES)}")


#: Every layer modifier by name, in canonical order (``@lexkit.attention.modifiers.register`` adds one).
MODIFIERS: Registry[type[Modifier]] = Registry("layer modifier", Modifier, _check)
register = MODIFIERS.register
names = MODIFIERS.names
for _cls in (LogN, Llama4, SSMax, Sink, Shift, SoftCap, Differential, StickBreaking, TopK, Selective, Entmax, Chunks,
             Conv, KShift, Gate, ScaleInvariant, Fitted, Adaptive, KeyOffset, ASScale):
    register(_cls)


def parse(text: str, train_len: int | None = None) -> Modifier:
    """A modifier from its spec (``logn``, ``llama4:beta=0.1``, ``shift:0.25``, ``softcap:50``), its
    training-length parameters pinned at ``train_len`` (None: left as given). ValueError naming the
    bad part and what is valid."""
    name, items = split_spec(text)
    cls = MODIFIERS.get(name)
    values = parse_params(f"modifier {name}", cls.params, items, positional=cls.positional)
    for key in cls.train_len_params:
        if values.get(key) is None and train_len is not None:
            values[key] = cls.params[key].parse(f"modifier {name}", key, int(train_len))
    return cls(**values)


def canonical_order(modifiers) -> tuple[Modifier, ...]:
    """``modifiers`` in registry order (the order a layer writes and applies them)."""
    order = {name: i for i, name in enumerate(MODIFIERS.names())}
    return tuple(sorted(modifiers, key=lambda m: order.get(m.name, len(order))))


def describe() -> list[tuple[str, str, str, str, str]]:
    """(name, place, parameters with defaults, summary, source) of every modifier."""
    return [(c.name, c.place, describe_params(c.params), c.summary, c.source) for c in MODIFIERS]


__all__ = [
    "ASScale", "Adaptive", "Chunks", "Conv", "DEFAULT_SHIFT", "Differential", "Entmax", "Fitted", "Gate", "KShift",
    "KeyOffset", "Llama4", "LogN", "MODIFIERS", "Modifier", "PLACES", "SSMax", "ScaleInvariant", "Scoring",
    "Selective", "Shape", "Shift", "Sink", "SoftCap", "StickBreaking", "Temperature", "TopK", "adaptive_beta",
    "as_scale", "adaptive_rows", "canonical_order", "causal_conv", "chunk_weights", "check_width", "describe",
    "entmax_weights", "fitted_scale", "gated", "logn_scale", "mix_previous", "names", "offset_keys", "parse",
    "register", "rows", "selective_weights", "shift_width", "sit_terms", "soft_cap", "stick_breaking",
    "token_shift", "top_k_weights",
]
