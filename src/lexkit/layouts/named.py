"""The named layouts: the field's per-layer designs (HWFA, HWFA2, RNoPE-SWA, iRoPE, Gemma, GPT-OSS), each
a class that builds its layers for a model's depth and training length as objects (a scheme, a
pattern, modifiers: no layout text is written to be parsed back), with its source (docs/layouts.md).
``@lexkit.layouts.register`` adds a user's own (``--import MODULE``)."""

from __future__ import annotations

from typing import Any, ClassVar

from ..attention.modifiers import Llama4, LogN, Modifier, Shift, Sink
from ..attention.patterns import BCA, Causal, Chunk, Window
from ..core.registry import Registry
from ..core.specs import Param, describe_params, parse_params, split_spec
from .layer import build_layer
from .stack import LayerStack, LayoutError

#: one layer of a named design: (scheme spec, pattern, modifiers)
Piece = tuple[str, Any, tuple[Modifier, ...]]


class NamedLayout:
    """A named design: subclasses set ``name``, ``params``, ``summary``, ``source`` and define
    :meth:`pieces`, each layer's (scheme, pattern, modifiers) for a model of ``n_layers`` trained at
    ``train_len`` (or raise :class:`LayoutError` when the depth cannot hold the design)."""

    name: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {}
    summary: ClassVar[str] = ""
    source: ClassVar[str] = ""

    @classmethod
    def pieces(cls, values: dict[str, Any], n_layers: int, train_len: int) -> list[Piece]:
        raise NotImplementedError

    @classmethod
    def all_params(cls) -> dict[str, Param]:
        """The design's parameters and those every named layout takes (``shift``)."""
        return {**cls.params, **COMMON}

    @classmethod
    def build(cls, text: str, *, n_layers: int, train_len: int, max_len: int | None = None) -> LayerStack:
        name, items = split_spec(text)
        try:
            values = parse_params(f"layout {name}", cls.all_params(), items)
        except ValueError as exc:
            raise LayoutError(str(exc)) from None
        shift = (Shift(F=values["shift"]),) if values["shift"] else ()
        layers = [build_layer(scheme, pattern, (*modifiers, *shift), train_len=train_len, max_len=max_len,
                              where=f"layout {text!r}, layer {i}")
                  for i, (scheme, pattern, modifiers) in enumerate(cls.pieces(values, n_layers, train_len))]
        return LayerStack(layers, train_len=train_len, position_len=max_len)


#: parameters every named layout takes
COMMON = {"shift": Param(float, 0.0, "token shift on every layer: the fraction of features from the position before "
                                      "(0.5: x-transformers' shift_tokens=1)", lambda x: 0 <= x < 1, "in [0, 1)")}

#: Every named layout; ``@lexkit.layouts.register`` adds a user's own (``--import MODULE``).
NAMED: Registry[type[NamedLayout]] = Registry("layout", NamedLayout)
register = NAMED.register


def _window(values: dict[str, Any], key: str, train_len: int) -> int:
    """A local layer's window or chunk ``values[key]``, by default the training length / 4 (at least 2)."""
    return values[key] if values[key] is not None else max(2, train_len // 4)


def _every(name: str, every: int, n_layers: int) -> None:
    if n_layers < every:
        raise LayoutError(f"layout {name}: one global layer in every {every} needs at least {every} layers, the "
                          f"model has {n_layers} (use more layers or a smaller every=)")


_W = Param(int, None, "local window W (default: the training length / 4)", lambda x: x >= 2, ">= 2")
_EVERY = Param(int, 4, "every k-th layer is global", lambda x: x >= 2, ">= 2")


def hwfa_window(n_layers: int, train_len: int, alpha: float = 0.75) -> int:
    """Su's receptive-field rule for HWFA: (w - 1)(L - 1) + 1 = alpha·N, alpha = 3/4, i.e. the local
    layers together see three quarters of the training length N (at least 2, at most N)."""
    return max(2, min(train_len, round((alpha * train_len - 1) / max(1, n_layers - 1)) + 1))


def windows_under(name: str, full: str, values: dict[str, Any], n_layers: int, train_len: int) -> list[Piece]:
    """HWFA's shape: L - 1 RoPE layers under ``window:W`` (W: ``values["W"]``, else Su's rule), then
    the full layer of scheme ``full`` under causal attention, with log-n when ``values["logn"]``."""
    if n_layers < 2:
        raise LayoutError(f"layout {name} needs at least 2 layers (window layers under one full layer)")
    w = values["W"] or hwfa_window(n_layers, train_len)
    logn = (LogN(L=train_len),) if values["logn"] else ()
    return [("rope", Window(W=w), ())] * (n_layers - 1) + [(full, Causal(), logn)]


@register
class HWFA(NamedLayout):
    """HWFA (Su 2023, "Hybrid Window-Full Attention"): layers 0..L-2 RoPE under window:W, the last
    layer full attention, NoPE, log-n."""

    name = "hwfa"
    params = {"W": Param(int, None, "window of the RoPE layers (default: Su's rule, (W-1)(L-1)+1 = 3N/4)",
                         lambda x: x >= 2, ">= 2"),
              "logn": Param(bool, True, "log-n temperature on the full layer")}
    summary = "RoPE window layers, then one full NoPE layer with log-n"
    source = "Su 2023, kexue.fm/archives/9603"

    @classmethod
    def pieces(cls, values, n_layers, train_len):
        return windows_under(cls.name, "none", values, n_layers, train_len)


@register
class HWFA2(NamedLayout):
    """HWFA2 (Su 2023): HWFA whose full layer has RoPE, trained as RoPE and run under ReRoPE:
    evaluate it with ``--scheme global=rerope:w=W``, W inside the training length (N/2 measured;
    docs/layouts.md). Run as trained, its full layer is plain RoPE, which does not extrapolate, and
    ReRoPE at w = N clamps every far key to a relative position training never reached."""

    name = "hwfa2"
    params = {"W": HWFA.params["W"], "logn": HWFA.params["logn"]}
    summary = "HWFA with RoPE on the full layer; evaluate with --scheme global=rerope:w=W"
    source = "Su 2023, kexue.fm/archives/9708"

    @classmethod
    def pieces(cls, values, n_layers, train_len):
        return windows_under(cls.name, "rope", values, n_layers, train_len)


@register
class RNoPESWA(NamedLayout):
    """RNoPE-SWA (Cohere, Command R7B / Command A): three RoPE layers under a sliding window, then
    one full-attention layer with no position encoding, repeated."""

    name = "rnope-swa"
    params = {"W": _W, "every": _EVERY}
    summary = "RoPE window layers with a full NoPE layer every k-th"
    source = "Yang et al. 2025, 'Rope to Nope and Back Again' (Cohere)"

    @classmethod
    def pieces(cls, values, n_layers, train_len):
        _every(cls.name, values["every"], n_layers)
        w = _window(values, "W", train_len)
        return [("none", Causal(), ()) if (i + 1) % values["every"] == 0 else ("rope", Window(W=w), ())
                for i in range(n_layers)]


@register
class IRoPE(NamedLayout):
    """iRoPE (Meta, Llama 4): every k-th layer global with no position encoding and the query
    temperature 1 + beta·ln(floor((m+1)/F) + 1); the others RoPE under chunked attention (a token
    sees its own chunk only; ``local=bca`` uses blockwise causal attention instead)."""

    name = "irope"
    params = {"chunk": Param(int, None, "chunk size of the RoPE layers (default: the training length / 4)",
                             lambda x: x >= 2, ">= 2"),
              "every": _EVERY,
              "local": Param(str, "chunk", "pattern of the RoPE layers: chunk (Llama 4) or bca",
                             lambda x: x in ("chunk", "bca"), "chunk or bca"),
              "beta": Param(float, 0.1, "temperature beta (Llama 4's attn_scale)", lambda x: x > 0, "> 0"),
              "floor": Param(int, None, "temperature floor F (default: the chunk size, as in Llama 4)",
                             lambda x: x >= 1, ">= 1")}
    summary = "chunked RoPE layers, a global NoPE layer with Llama 4's temperature every k-th"
    source = "Meta 2025, Llama 4 (transformers' llama4: no_rope_layers, attention_chunk_size)"

    @classmethod
    def pieces(cls, values, n_layers, train_len):
        _every(cls.name, values["every"], n_layers)
        chunk = _window(values, "chunk", train_len)
        if values["local"] == "bca" and chunk % 2:
            raise LayoutError(f"layout irope: local=bca needs an even chunk, got {chunk}")
        temperature = Llama4(beta=values["beta"], floor=values["floor"] or chunk)
        local = Chunk(W=chunk) if values["local"] == "chunk" else BCA(W=chunk)
        return [("none", Causal(), (temperature,)) if (i + 1) % values["every"] == 0 else ("rope", local, ())
                for i in range(n_layers)]


@register
class Gemma(NamedLayout):
    """Gemma 2 / 3: RoPE on every layer; ``ratio`` local layers (window W, RoPE base
    ``local_base``) per global one (full attention, base ``global_base``). Gemma 3: ratio 5, bases
    10k / 1M; Gemma 2: ratio 1, one base (its logit soft-capping is not part of this layout)."""

    name = "gemma"
    params = {"W": _W,
              "ratio": Param(int, 5, "local layers per global one (Gemma 3: 5, Gemma 2: 1)", lambda x: x >= 1,
                             ">= 1"),
              "local_base": Param(float, 10000.0, "RoPE base of the local layers", lambda x: x > 0, "> 0"),
              "global_base": Param(float, 1000000.0, "RoPE base of the global layers", lambda x: x > 0, "> 0")}
    summary = "RoPE everywhere; ratio local window layers per global one, a base per type"
    source = "Gemma Team 2024/2025, Gemma 2 and Gemma 3 technical reports"

    @classmethod
    def pieces(cls, values, n_layers, train_len):
        _every(cls.name, values["ratio"] + 1, n_layers)
        w = _window(values, "W", train_len)
        local = (f"rope:base={values['local_base']:g}", Window(W=w), ())
        full = (f"rope:base={values['global_base']:g}", Causal(), ())
        return [full if (i + 1) % (values["ratio"] + 1) == 0 else local for i in range(n_layers)]


@register
class GPTOSS(NamedLayout):
    """GPT-OSS (OpenAI 2025): layers alternate a banded window and full attention, RoPE everywhere,
    and every layer has a learned sink logit per head."""

    name = "gpt-oss"
    params = {"W": _W}
    summary = "alternating window / full RoPE layers, a learned sink logit per head"
    source = "OpenAI 2025, gpt-oss model card (transformers' gpt_oss: layer_types, sinks)"

    @classmethod
    def pieces(cls, values, n_layers, train_len):
        w = _window(values, "W", train_len)
        return [("rope", Window(W=w) if i % 2 == 0 else Causal(), (Sink(),)) for i in range(n_layers)]


def describe() -> list[tuple[str, str, str, str]]:
    """(name, parameters with defaults, summary, source) of every named layout."""
    return [(c.name, describe_params(c.all_params()), c.summary, c.source) for c in NAMED]
