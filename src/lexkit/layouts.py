"""Layouts: a position scheme, an attention pattern, a temperature and a sink per layer.

Since the seeds, the designs that aim to be flat *and* use a long context give layers different jobs
(docs/layouts.md): local layers (RoPE inside a window or chunk, never out of distribution) under
global layers (full attention, usually no position encoding, a length-dependent temperature). A
layout says what every layer is, as one spec a person can type (``lexkit train --layout``)::

    layout   := NAME[:PARAMS]                      a named design: hwfa, hwfa2, rnope-swa, irope, gemma, gpt-oss
              | group (';' group)*
    group    := layer ['x' N] | '(' layout ')' 'x' N
    layer    := [SCHEME] ['@' PATTERN] ('+' MODIFIER)*
    MODIFIER := TEMPERATURE | 'sink'                TEMPERATURE: logn, llama4[:beta=B,floor=F], ssmax

e.g. ``rope@window:16 ; none@causal+logn`` (HWFA on two layers) or ``(rope@window:64)x3 ; none``.
A layer's SCHEME defaults to the model's ``--scheme``, its PATTERN to ``causal``; a pattern's W
defaults to the training length. A layout of k layers on a model of n layers repeats n/k times
when k divides n; any other length is an error naming both.

A layer is **local** when its pattern has a finite reach (window, bca, chunk, sinks) and **global**
otherwise; the two words select layers at evaluation, beside ``L3`` and ``L0-2`` (0-based,
inclusive). The pattern a layer trains under is part of the model. At evaluation:

* an unqualified pattern (``--pattern window:64``) applies to every layer *inside* its own (the keys
  visible under both, :func:`lexkit.attention.intersect`): ``causal`` is the run's own layout, and a
  uniform model (every layer causal) reads exactly as before;
* ``SELECTOR=PATTERN`` replaces the pattern of the layers it selects (``--pattern global=window:64``,
  ``--pattern local=causal`` widens the local layers); several join with ``;``
  (``local=causal;global=window:256``).

Rules checked once, here, naming the layer: every scheme, pattern and temperature exists and takes its
parameters; an absolute scheme (it adds positions to the embeddings) is all layers' or none's; a
temperature grows with the position, so it belongs to a global layer (a local layer's count of
visible keys stops at its reach).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from . import positions
from .attention import Layered, Pattern, intersect
from .attention import create as create_pattern
from .attention import temperature as temperatures
from .registry import Registry
from .specs import Param, describe_params, parse_params, split_spec

SINK = "sink"
KINDS = ("local", "global")


@dataclasses.dataclass(frozen=True)
class Layer:
    """One layer of a layout, canonical: scheme spec, pattern spec (W resolved), temperature spec
    (None: none) and whether it adds a learned sink logit per head."""

    scheme: str
    pattern: str = "causal"
    temperature: str | None = None
    sink: bool = False

    @property
    def spec(self) -> str:
        out = f"{self.scheme}@{self.pattern}"
        if self.temperature:
            out += f"+{self.temperature}"
        return out + (f"+{SINK}" if self.sink else "")

    @property
    def kind(self) -> str:
        """``local`` (a pattern with finite reach) or ``global``."""
        return "global" if create_pattern(self.pattern).reach is None else "local"


class LayoutError(ValueError):
    """A layout spec that cannot be built (one line naming the layer)."""


# -- parsing ------------------------------------------------------------------------------------
def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split on ``sep`` outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise LayoutError(f"layout {text!r}: a ')' without its '('")
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise LayoutError(f"layout {text!r}: a '(' without its ')'")
    parts.append(text[start:])
    return [p.strip() for p in parts]


_REPEAT = re.compile(r"^(.*?)\s*x\s*(\d+)$", re.S)
_MODIFIER = re.compile(r"\+(?=[A-Za-z])")


def _expand(text: str, whole: str) -> list[str]:
    """The layer texts of ``text``, repetitions unrolled."""
    out: list[str] = []
    for group in _split_top(text, ";"):
        if not group:
            raise LayoutError(f"layout {whole!r}: an empty layer (two ';' in a row, or one at an end)")
        count = 1
        match = _REPEAT.match(group)
        if match and (match.group(1).endswith(")") or "@" in match.group(1) or "+" in match.group(1)
                      or match.group(1).strip() in positions.names()):
            group, count = match.group(1).strip(), int(match.group(2))
            if count < 1:
                raise LayoutError(f"layout {whole!r}: repeat count {count} must be at least 1")
        if group.startswith("("):
            if not group.endswith(")"):
                raise LayoutError(f"layout {whole!r}: {group!r} must be '(LAYERS)xN'")
            inner = _expand(group[1:-1], whole)
        else:
            inner = [group]
        out += inner * count
    return out


def parse_layer(text: str, *, scheme: str, train_len: int, max_len: int | None = None, where: str = "") -> Layer:
    """One layer's text (``rope@window:16+logn``) -> :class:`Layer`, canonical and pinned: every value
    that defaults to the training length written out (a pattern's W, ReRoPE's w, a scaled RoPE's
    original_len at ``max_len or train_len``, Llama 4's floor), so the layer stays what it was when
    the model trains or is fine-tuned at another length. ``scheme`` fills an omitted scheme.
    ValueError naming ``where`` (``layer 2``) and the bad part."""
    head, *mods = [m.strip() for m in _MODIFIER.split(text.strip())]
    scheme_text, at, pattern_text = (s.strip() for s in head.partition("@"))
    prefix = f"{where}: " if where else ""
    if at and not pattern_text:
        raise LayoutError(f"{prefix}{text!r} has '@' and no pattern after it")
    try:
        scheme_spec = positions.pin(scheme_text or scheme, max_len or train_len)
        pattern = create_pattern(pattern_text or "causal", default_window=train_len)
        temperature, sink = None, False
        for mod in mods:
            if mod == SINK:
                if sink:
                    raise ValueError("'+sink' given twice")
                sink = True
            elif temperature is not None:
                raise ValueError(f"two temperatures ({temperature} and {mod}); a layer takes one")
            else:
                temperature = temperatures.pin(mod, train_len)
    except (ValueError, KeyError) as exc:
        raise LayoutError(f"{prefix}{exc}") from None
    layer = Layer(scheme_spec, pattern.spec, temperature, sink)
    if temperature is not None and pattern.reach is not None:
        raise LayoutError(f"{prefix}temperature {temperature} grows with the position, but {pattern.spec} shows at "
                          f"most {pattern.reach} keys: a temperature belongs to a global layer (causal)")
    return layer


def parse(text: str, *, n_layers: int, train_len: int, scheme: str = "rope", max_len: int | None = None) -> list[Layer]:
    """A layout spec (named or written out) -> one :class:`Layer` per layer of an ``n_layers``
    model trained at ``train_len`` (``max_len``: a learned table's size, default ``train_len``).
    :class:`LayoutError` (a ValueError) names the layer at fault."""
    if not isinstance(text, str) or not text.strip():
        raise LayoutError(f"empty layout {text!r}")
    text = text.strip()
    name = split_spec(text)[0] if not re.search(r"[@;()+]", text) else None
    if name is not None and name in NAMED:
        return NAMED.get(name).build(text, n_layers=n_layers, train_len=train_len, max_len=max_len)
    if name is not None and name not in positions.names():
        raise LayoutError(f"unknown layout {name!r}: not a named layout ({', '.join(NAMED.names())}) nor a scheme "
                          f"({', '.join(positions.names())}); a written-out layout is SCHEME@PATTERN;...")
    pieces = _expand(text, text)
    if n_layers % len(pieces):
        raise LayoutError(f"layout {text!r} has {len(pieces)} layers and the model {n_layers}: give {n_layers} "
                          f"layers (or a number that divides it, repeated to fit; '(...)xN' repeats)")
    pieces = pieces * (n_layers // len(pieces))
    where = (lambda i: f"layout layer {i} ({pieces[i]!r})") if len(pieces) > 1 else (lambda i: f"layout {text!r}")
    layers = [parse_layer(p, scheme=scheme, train_len=train_len, max_len=max_len, where=where(i))
              for i, p in enumerate(pieces)]
    check(layers)
    return layers


def check(layers: Sequence[Layer]) -> None:
    """Rules across layers: an absolute scheme is every layer's or none's."""
    for i, layer in enumerate(layers):
        cls = positions.get(split_spec(layer.scheme)[0])
        if cls.family == "absolute" and any(other.scheme != layer.scheme for other in layers):
            raise LayoutError(f"layout layer {i}: {layer.scheme} adds positions to the token embeddings, not to a "
                              "layer; an absolute scheme must be every layer's")


def uniform(scheme: str, n_layers: int, *, logn: bool = False) -> list[Layer]:
    """Today's model: every layer ``scheme`` under causal attention (log-n on every layer)."""
    return [Layer(positions.canonical(scheme), "causal", "logn" if logn else None)] * n_layers


def canonical(layers: Sequence[Layer]) -> str:
    """The written-out spec of ``layers``, runs of equal layers as ``(...)xN``."""
    out, i = [], 0
    while i < len(layers):
        j = i
        while j + 1 < len(layers) and layers[j + 1] == layers[i]:
            j += 1
        count = j - i + 1
        out.append(layers[i].spec if count == 1 else f"({layers[i].spec})x{count}")
        i = j + 1
    return ";".join(out)


def is_uniform(layers: Sequence[Layer]) -> bool:
    return all(layer == layers[0] for layer in layers)


# -- selecting layers -----------------------------------------------------------------------------
_INDEX = re.compile(r"^L(\d+)(?:-(\d+))?$")


def select(selector: str, kinds: Sequence[str]) -> list[int]:
    """The layers a selector names, given each layer's kind (``local``/``global``, or a Hugging Face
    model's own layer types): a kind, ``L3`` or ``L0-2`` (0-based, inclusive). ValueError naming what
    this model has."""
    selector = selector.strip()
    match = _INDEX.match(selector)
    if match:
        lo = int(match.group(1))
        hi = int(match.group(2)) if match.group(2) is not None else lo
        if lo > hi or hi >= len(kinds):
            raise ValueError(f"layer selector {selector!r}: the model has layers L0-{len(kinds) - 1}")
        return list(range(lo, hi + 1))
    chosen = [i for i, kind in enumerate(kinds) if kind == selector]
    if not chosen:
        have = sorted(set(kinds))
        if selector in KINDS or selector in have:
            raise ValueError(f"layer selector {selector!r}: this model has no {selector} layer "
                             f"(its layers are {', '.join(have)})")
        raise ValueError(f"unknown layer selector {selector!r}; valid: {', '.join(have)}, L<i> or L<i>-<j> "
                         f"(layers L0-{len(kinds) - 1})")
    return chosen


_SELECTOR = re.compile(r"^\s*([A-Za-z][\w\-]*)\s*=(.*)$", re.S)


def split_overrides(text: str) -> tuple[str | None, list[tuple[str, str]]]:
    """``"window:64;global=causal"`` -> (``"window:64"``, ``[("global", "causal")]``): the unqualified
    part (at most one) and the ``SELECTOR=SPEC`` parts, in order. A part is qualified when it starts
    with a selector and ``=`` before any ``:`` (``window:W=64`` is a pattern, not a selector)."""
    plain: str | None = None
    pairs: list[tuple[str, str]] = []
    for part in text.split(";"):
        match = _SELECTOR.match(part)
        if match and ":" not in match.group(1):
            if not match.group(2).strip():
                raise ValueError(f"{part.strip()!r}: nothing after '='")
            pairs.append((match.group(1), match.group(2).strip()))
        elif not part.strip():
            raise ValueError(f"{text!r} has an empty part (two ';' in a row, or one at an end)")
        elif plain is not None:
            raise ValueError(f"{text!r} has two patterns for every layer ({plain!r}, {part.strip()!r}); "
                             "qualify one with SELECTOR= (local, global, L<i>)")
        else:
            plain = part.strip()
    return plain, pairs


def check_scheme(spec: str) -> None:
    """ValueError for an evaluation ``--scheme`` no run could take (each part's scheme and
    parameters), before any model loads; selectors are checked against the run."""
    plain, pairs = split_overrides(spec)
    for text in ([plain] if plain is not None else []) + [text for _, text in pairs]:
        positions.canonical(text)


def check_pattern(spec: str) -> None:
    """ValueError for an evaluation pattern spec that no model could take (syntax, names, parameter
    values), before any model loads; W may be left to the model. Selectors are checked against the
    model when the spec resolves."""
    plain, pairs = split_overrides(spec)
    for text in ([plain] if plain is not None else []) + [text for _, text in pairs]:
        create_pattern(text, default_window=2)


def resolve_pattern(own: Sequence[Pattern], kinds: Sequence[str], spec: str | Pattern, *,
                    default_window: int | None) -> Pattern:
    """What an evaluation pattern means on a model whose layers have patterns ``own`` (module
    docstring): a plain :class:`Pattern` when every layer gets the same one from an unqualified
    spec (a uniform model reads exactly as before), else a :class:`Layered` pattern labelled with
    the canonical spec."""
    if isinstance(spec, Layered):
        return spec
    if isinstance(spec, Pattern):
        plain, pairs = spec, []
    else:
        text, pairs = split_overrides(spec)
        plain = None if text is None else create_pattern(text, default_window=default_window)
    layers = [p if plain is None else intersect(p, plain) for p in own]
    labels = [] if plain is None else [plain.spec]
    for selector, text in pairs:
        pattern = create_pattern(text, default_window=default_window)
        for i in select(selector, kinds):
            layers[i] = pattern
        labels.append(f"{selector}={pattern.spec}")
    if not pairs and all(p == layers[0] for p in layers):
        return layers[0]
    return Layered(layers, ";".join(labels) or "causal")


def override_schemes(layers: Sequence[Layer], spec: str, length: int) -> list[Layer]:
    """``layers`` with the schemes an evaluation ``--scheme`` gives (``rope:scaling=yarn,factor=4``,
    ``global=rerope:w=64``, ``L0-2=rope:base=500000``), pinned at the model's training ``length``.
    Unqualified, it replaces the scheme of every layer on a model with one scheme, and otherwise of
    the layers whose scheme is of its family (RoPE scalings reach the layers with RoPE only); an
    error when none is."""
    plain, pairs = split_overrides(spec)
    out = list(layers)
    kinds = [layer.kind for layer in layers]
    if plain is not None:
        new = positions.pin(plain, length)
        family = positions.get(split_spec(new)[0]).family
        if len({layer.scheme for layer in layers}) == 1:
            chosen = list(range(len(layers)))
        else:
            chosen = [i for i, layer in enumerate(layers)
                      if positions.get(split_spec(layer.scheme)[0]).family == family]
            if not chosen:
                have = ", ".join(sorted({layer.scheme for layer in layers}))
                raise ValueError(f"--scheme {plain}: no layer of this model has a {family} scheme (it has {have}); "
                                 "name the layers, e.g. --scheme global=SPEC or L0=SPEC")
        for i in chosen:
            out[i] = dataclasses.replace(out[i], scheme=new)
    for selector, text in pairs:
        new = positions.pin(text, length)
        for i in select(selector, kinds):
            out[i] = dataclasses.replace(out[i], scheme=new)
    check(out)
    return out


# -- named layouts ----------------------------------------------------------------------------------
class NamedLayout:
    """A named design: subclasses set ``name``, ``params``, ``summary``, ``source`` and define
    :meth:`pieces`, the text of each layer for a model of ``n_layers`` trained at ``train_len``
    (or raise :class:`LayoutError` when the depth cannot hold the design)."""

    name: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {}
    summary: ClassVar[str] = ""
    source: ClassVar[str] = ""

    @classmethod
    def pieces(cls, values: dict[str, Any], n_layers: int, train_len: int) -> list[str]:
        raise NotImplementedError

    @classmethod
    def build(cls, text: str, *, n_layers: int, train_len: int, max_len: int | None = None) -> list[Layer]:
        name, items = split_spec(text)
        try:
            values = parse_params(f"layout {name}", cls.params, items)
        except ValueError as exc:
            raise LayoutError(str(exc)) from None
        pieces = cls.pieces(values, n_layers, train_len)
        layers = [parse_layer(p, scheme="rope", train_len=train_len, max_len=max_len,
                              where=f"layout {text!r}, layer {i}") for i, p in enumerate(pieces)]
        check(layers)
        return layers


#: Every named layout; ``@lexkit.layouts.register`` adds a user's own (``--import MODULE``).
NAMED: Registry[type[NamedLayout]] = Registry("layout", NamedLayout)
register = NAMED.register


def _window(values: dict[str, Any], key: str, train_len: int, default: int) -> int:
    return values[key] if values[key] is not None else max(2, default)


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
        if n_layers < 2:
            raise LayoutError("layout hwfa needs at least 2 layers (window layers under one full layer)")
        w = values["W"] or hwfa_window(n_layers, train_len)
        return [f"rope@window:{w}"] * (n_layers - 1) + ["none@causal" + ("+logn" if values["logn"] else "")]


@register
class HWFA2(NamedLayout):
    """HWFA2 (Su 2023): HWFA whose full layer has RoPE in training and ReRoPE at inference. Written
    as ``rerope:w=N`` on the full layer: inside the training length N it is RoPE exactly, past it
    the relative positions stay at N (never out of distribution)."""

    name = "hwfa2"
    params = {"W": HWFA.params["W"], "logn": HWFA.params["logn"],
              "w": Param(int, None, "ReRoPE window of the full layer (default: the training length)",
                         lambda x: x >= 1, ">= 1")}
    summary = "HWFA with RoPE on the full layer, run as ReRoPE"
    source = "Su 2023, kexue.fm/archives/9708"

    @classmethod
    def pieces(cls, values, n_layers, train_len):
        if n_layers < 2:
            raise LayoutError("layout hwfa2 needs at least 2 layers (window layers under one full layer)")
        w = values["W"] or hwfa_window(n_layers, train_len)
        full = f"rerope:w={values['w'] or train_len}@causal" + ("+logn" if values["logn"] else "")
        return [f"rope@window:{w}"] * (n_layers - 1) + [full]


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
        w = _window(values, "W", train_len, train_len // 4)
        return ["none@causal" if (i + 1) % values["every"] == 0 else f"rope@window:{w}" for i in range(n_layers)]


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
        chunk = _window(values, "chunk", train_len, train_len // 4)
        if values["local"] == "bca" and chunk % 2:
            raise LayoutError(f"layout irope: local=bca needs an even chunk, got {chunk}")
        temp = f"llama4:beta={values['beta']},floor={values['floor'] or chunk}"
        return [f"none@causal+{temp}" if (i + 1) % values["every"] == 0 else f"rope@{values['local']}:{chunk}"
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
        w = _window(values, "W", train_len, train_len // 4)
        local = f"rope:base={values['local_base']:g}@window:{w}"
        full = f"rope:base={values['global_base']:g}@causal"
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
        w = _window(values, "W", train_len, train_len // 4)
        return [f"rope@window:{w}+sink" if i % 2 == 0 else "rope@causal+sink" for i in range(n_layers)]


def describe() -> list[tuple[str, str, str, str]]:
    """(name, parameters with defaults, summary, source) of every named layout."""
    return [(c.name, describe_params(c.params), c.summary, c.source) for c in NAMED]
