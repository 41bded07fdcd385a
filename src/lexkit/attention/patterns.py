"""Inference-time attention patterns: each is one mask predicate over query/key indices.

The predicate ``visible(q_idx, k_idx)`` (integer tensors that broadcast) feeds the dense additive
mask, FlexAttention's ``mask_mod`` and the chunked kernel alike. Indices count from the start of
the input (0 .. n-1), so a pattern's blocks do not move with a position ``offset``.

* ``causal``: n <= m.
* ``window:W``: causal and near, 0 <= m - n < W (the "super-strong baseline" of the essay *The
  Path to the Transformer, Part 7: Length Extrapolation and Local Attention*; W = the training
  length).
* ``bca:W``: blockwise causal attention (Sun et al. 2022, Sec. 3.3): blocks of W/2; each block sees
  itself causally and all of the previous block.

* ``chunk:W``: chunked attention (Llama 4's local layers): a query sees only the keys of its own
  chunk of W, causally, n <= m and floor(n/W) = floor(m/W) (unlike ``bca``, not the previous one).
* ``sinks:W,K=4``: attention sinks (StreamingLLM, Xiao et al. 2023): the first K keys always
  visible beside a window of W keys, n <= m and (n < K or m - n < W): ``Either(First(K), Window(W))``.
  Positions ``pos=text`` (the
  text's own positions) or ``pos=cache`` (StreamingLLM's: positions assigned within a cache of
  K + W slots, so a sink key n is scored at distance min(m, K + W - 1) - n).
* ``first:K=4``: the first K keys, causally, n <= m and n < K (the sinks alone: a part to compose,
  ``first:4|window:64`` is ``sinks:64`` by mask).

``reach`` bounds the distances a pattern can make visible beside its ``sinks`` leading keys (every
visible pair has m - n < reach or n < sinks); kernels use the two to skip keys that can never be
seen (O(n·(W + K)) cost for local patterns), and a streaming KV cache keeps exactly those keys: the
first ``sinks`` and the last ``reach``.

Patterns compose as predicates do: :class:`Both` (and: a pattern inside a layer's own) and
:class:`Either` (or: attention-gym's ``or_masks``); each combinator derives ``reach``, ``sinks`` and
``retained`` from its parts, so the kernels' key blocks, the block masks and the KV cache follow
from the composition. A spec writes them as ``a|b`` and ``a&b`` (:func:`create` reads what ``spec``
prints): ``window:64|first:4`` is ``Either(Window(64), First(4))``; ``&`` binds tighter than ``|``
(as in Python), both group from the left, and parentheses group (``(window:64|first:4)&chunk:128``).

lexkit's window convention: ``window:W`` and ``sinks:W`` show W keys *including the query itself*
(HF's sliding window; attention-gym's ``sliding_window(W)`` shows W + 1).
``retained(k_idx, q)`` says which keys some query at index >= q can still see (by default the
sinks and the keys within ``reach``; BCA overrides it): the KV cache (``cache.py``) keeps exactly
those.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import torch
from torch import Tensor

from ..core.registry import Registry
from ..core.specs import Param, describe_params, parse_params, spec_text, split_spec


class Pattern:
    """Base class: subclasses set ``name``, ``params`` and define :meth:`visible`."""

    name: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {}
    positional: ClassVar[str | None] = None
    summary: ClassVar[str] = ""
    #: what a combinator's spec joins its parts with (``|``, ``&``); None for a named pattern
    operator: ClassVar[str | None] = None
    #: why a compiled training step (:mod:`lexkit.training.compiled`) cannot trace it as one graph (None: it can)
    compile_refusal: ClassVar[str | None] = None

    def __init__(self, **values: Any) -> None:
        self.values = values

    def visible(self, q_idx: Tensor, k_idx: Tensor) -> Tensor:
        raise NotImplementedError

    @property
    def reach(self) -> int | None:
        """Every visible pair has 0 <= m - n < reach (None: unbounded)."""
        return None

    def retained(self, k_idx: Tensor, q: int) -> Tensor:
        """Bool mask over key indices ``k_idx``: True where some query at index >= q may see the key.
        Default from ``reach`` and ``sinks``: m - n < reach for some m >= q, i.e. n > q - reach, or
        n < sinks (all keys when the reach is unbounded). Must be True for every key at index >= q
        (causal self-attention)."""
        reach = self.reach
        if reach is None:
            return k_idx >= k_idx.new_zeros(())
        return (k_idx > q - reach) | (k_idx < self.sinks)

    @property
    def sinks(self) -> int:
        """Keys 0 .. sinks-1 may be visible at any distance (beyond ``reach``)."""
        return 0

    @property
    def cache_positions(self) -> bool:
        """True when sink keys are scored at their cache distance (StreamingLLM), not the text's:
        the kernels then rescore the sink columns with the query at :meth:`sink_query_index`."""
        return False

    def sink_query_index(self, q_idx: Tensor) -> Tensor:
        """The index whose position the query takes when scoring a sink key (its cache slot)."""
        return q_idx

    def keys(self, start: int, stop: int, device=None) -> Tensor:
        """Key indices [n_k] the queries start .. stop-1 can see: the sinks (if out of reach),
        then the keys within reach. The single rule behind the chunked kernel's key blocks, the
        resolution instrument's counts and (later) a streaming cache's contents."""
        reach = self.reach
        k_start = 0 if reach is None else max(0, start - reach + 1)
        near = torch.arange(k_start, stop, device=device)
        if self.sinks and k_start > 0:
            return torch.cat((torch.arange(min(self.sinks, k_start), device=device), near))
        return near

    def first_key(self, start: int) -> int:
        """The first index :meth:`keys` returns for queries from ``start`` on (0 when sinks lead), as a
        Python int: the chunked kernel slices with it without reading a tensor back (a host sync,
        which a compiled training step cannot trace)."""
        k_start = 0 if self.reach is None else max(0, start - self.reach + 1)
        return 0 if self.sinks and k_start > 0 else k_start

    @property
    def spec(self) -> str:
        """Canonical spec with W resolved: ``window:128``, ``bca:256``, ``causal``."""
        if self.positional is not None:  # window:128, sinks:128,K=2
            rest = {k: p for k, p in self.params.items() if k != self.positional}
            tail = spec_text(self.name, rest, self.values)[len(self.name) + 1:]
            return f"{self.name}:{self.values[self.positional]}" + (f",{tail}" if tail else "")
        return spec_text(self.name, self.params, self.values)

    def __repr__(self) -> str:
        return f"Pattern({self.spec!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pattern) and other.spec == self.spec

    def __hash__(self) -> int:
        return hash(self.spec)


def causal(q_idx: Tensor, k_idx: Tensor) -> Tensor:
    return k_idx <= q_idx


def near(q_idx: Tensor, k_idx: Tensor, width: int) -> Tensor:
    return q_idx - k_idx < width


def _width(x: int) -> bool:
    return x > 0


#: Every attention pattern by name; ``@lexkit.attention.register`` adds a user's own.
PATTERNS: Registry[type[Pattern]] = Registry("attention pattern", Pattern)
register = PATTERNS.register
names = PATTERNS.names


@register
class Causal(Pattern):
    """Full causal attention: query m sees every key n <= m."""

    name = "causal"
    summary = "every earlier key (training's pattern)"

    def visible(self, q_idx: Tensor, k_idx: Tensor) -> Tensor:
        return causal(q_idx, k_idx)


@register
class Window(Pattern):
    """Sliding window: causal and near, 0 <= m - n < W (the essay's super-strong baseline)."""

    name = "window"
    params = {"W": Param(int, None, "window size (default: the training length)", _width, "> 0")}
    positional = "W"
    summary = "causal and 0 <= m-n < W: the super-strong baseline"

    def visible(self, q_idx: Tensor, k_idx: Tensor) -> Tensor:
        return causal(q_idx, k_idx) & near(q_idx, k_idx, self.values["W"])

    @property
    def reach(self) -> int:
        return self.values["W"]


@register
class BCA(Pattern):
    """Blockwise causal attention (Sun et al. 2022, Sec. 3.3): blocks of W/2 tokens; a query sees
    its own block causally and the whole previous block."""

    name = "bca"
    params = {
        "W": Param(int, None, "twice the block size (default: the training length; even)",
                   lambda x: x > 0 and x % 2 == 0, "a positive even integer"),
    }
    positional = "W"
    summary = "blocks of W/2: own block causally + the previous block"

    def visible(self, q_idx: Tensor, k_idx: Tensor) -> Tensor:
        block = self.values["W"] // 2
        return causal(q_idx, k_idx) & (k_idx // block >= q_idx // block - 1)

    def retained(self, k_idx: Tensor, q: int) -> Tensor:
        """The previous block and the current one: queries from q on see no key before the
        block preceding q's block."""
        block = self.values["W"] // 2
        return k_idx >= (q // block - 1) * block

    @property
    def reach(self) -> int:
        return self.values["W"]


@register
class Chunk(Pattern):
    """Chunked attention (Llama 4's local RoPE layers, ``attention_chunk_size``): the input in chunks
    of W; a query sees the keys of its own chunk up to itself, n <= m and floor(n/W) = floor(m/W).
    Unlike ``bca`` a chunk never sees the previous one, so the first query of a chunk sees only
    itself."""

    name = "chunk"
    params = {"W": Param(int, None, "chunk size (default: the training length)", _width, "> 0")}
    positional = "W"
    summary = "chunks of W: own chunk causally, nothing before it (Llama 4)"

    def visible(self, q_idx: Tensor, k_idx: Tensor) -> Tensor:
        size = self.values["W"]
        return causal(q_idx, k_idx) & (k_idx // size == q_idx // size)

    def retained(self, k_idx: Tensor, q: int) -> Tensor:
        """The current chunk only: queries from q on never see a key before q's chunk."""
        size = self.values["W"]
        return k_idx >= (q // size) * size

    @property
    def reach(self) -> int:
        return self.values["W"]


@register
class First(Pattern):
    """The first K keys, causally: n <= m and n < K (a combinator part: the attention sinks of
    StreamingLLM are ``Either(First(K), Window(W))``, ``first:4|window:64``). Every visible pair has
    n < K, so its reach is 0 and its sinks K."""

    name = "first"
    params = {"K": Param(int, 4, "number of visible first keys (StreamingLLM's 4)", _width, "> 0")}
    positional = "K"
    summary = "the first K keys (sinks without the window; compose: first:4|window:64)"

    def __init__(self, K: int) -> None:
        super().__init__(K=int(K))

    def visible(self, q_idx: Tensor, k_idx: Tensor) -> Tensor:
        return causal(q_idx, k_idx) & (k_idx < self.values["K"])

    @property
    def reach(self) -> int:
        return 0

    @property
    def sinks(self) -> int:
        return self.values["K"]

    def retained(self, k_idx: Tensor, q: int) -> Tensor:
        return (k_idx < self.values["K"]) | (k_idx >= q)


class Either(Pattern):
    """Visible under either pattern: ``Either(a, b).visible = a.visible | b.visible``
    (attention-gym's ``or_masks``, transformers' ``or_masks``; the sinks of StreamingLLM are
    ``Either(First(K), Window(W))``). A combinator; its spec is ``a|b``.

    Its bookkeeping is derived from the parts: a visible pair is visible under some part, so it
    has m - n below that part's reach or n below its sinks; the reach is the largest part reach
    (None when a part is unbounded) and the sinks the most sinks. A key is retained when either
    part retains it."""

    name = "either"
    operator = "|"

    def __init__(self, first: Pattern, second: Pattern, **values: Any) -> None:
        super().__init__(**values)
        self.first, self.second = first, second

    def visible(self, q_idx: Tensor, k_idx: Tensor) -> Tensor:
        return self.first.visible(q_idx, k_idx) | self.second.visible(q_idx, k_idx)

    @property
    def reach(self) -> int | None:
        reaches = (self.first.reach, self.second.reach)
        return None if None in reaches else max(reaches)

    @property
    def sinks(self) -> int:
        return max(self.first.sinks, self.second.sinks)

    def retained(self, k_idx: Tensor, q: int) -> Tensor:
        return self.first.retained(k_idx, q) | self.second.retained(k_idx, q)

    @property
    def cache_positions(self) -> bool:
        return self.first.cache_positions or self.second.cache_positions

    @property
    def spec(self) -> str:
        return f"{self.first.spec}|{self.second.spec}"


@register
class Sinks(Either):
    """Attention sinks (StreamingLLM, Xiao et al. 2023): the first K keys or a window of W,
    ``Either(First(K), Window(W))``: key n visible to query m iff n <= m and (n < K or m - n < W).
    ``pos=text`` keeps the text's positions; ``pos=cache`` assigns them within a cache of K + W
    slots as StreamingLLM does (keys cached before rotation, re-rotated by slot): a sink key n is
    then at distance min(m, K + W - 1) - n from query m, and the window keys at their text
    distance. (With W keys including the query, the paper's window of R recent tokens plus the
    query is W = R + 1.)"""

    name = "sinks"
    compile_refusal = "is a combinator whose parts the tracer cannot hash (a graph break)"
    params = {
        "W": Param(int, None, "window size, keys including self (default: the training length)", _width, "> 0"),
        "K": Param(int, 4, "number of always-visible first keys (the paper's 4)", _width, "> 0"),
        "pos": Param(str, "text", "positions: text (as in the text) or cache (StreamingLLM's, within the cache)",
                     lambda x: x in ("text", "cache"), "text or cache"),
    }
    positional = "W"
    summary = "the first K keys + a window of W (StreamingLLM); pos=text|cache"
    operator = None  # a named pattern: its spec is sinks:W,..., not first:K|window:W

    def __init__(self, **values: Any) -> None:
        super().__init__(First(values["K"]), Window(W=values["W"]), **values)

    @property
    def cache_positions(self) -> bool:
        return self.values["pos"] == "cache"

    def sink_query_index(self, q_idx: Tensor) -> Tensor:
        if not self.cache_positions:
            return q_idx
        return q_idx.clamp(max=self.values["K"] + self.values["W"] - 1)

    @property
    def spec(self) -> str:
        return Pattern.spec.fget(self)


class Both(Pattern):
    """Visible under both patterns: ``Both(first, second).visible = first.visible & second.visible``
    (a lexkit pattern inside a model's own sliding window; an evaluation pattern on a layer that
    has its own). A combinator, not a registered name: its spec is ``first&second``, a part joined
    by ``|`` in parentheses (``(a|b)&c``: ``&`` binds tighter, so ``a|b&c`` is ``a|(b&c)``).

    Its bookkeeping is a superset of the truth, which is all the kernels and the cache need: the
    reach and sinks are those of the part with the smaller reach (every visible pair is visible
    under that part, so its keys are a superset), and a key is retained when both parts retain it.
    Sinks scored at cache slots (``pos=cache``) do not combine: :func:`intersect` refuses them."""

    name = "both"
    operator = "&"

    def __init__(self, first: Pattern, second: Pattern) -> None:
        super().__init__()
        self.first, self.second = first, second

    def visible(self, q_idx: Tensor, k_idx: Tensor) -> Tensor:
        return self.first.visible(q_idx, k_idx) & self.second.visible(q_idx, k_idx)

    def _tighter(self) -> Pattern:
        reaches = [(p.reach, i, p) for i, p in enumerate((self.first, self.second)) if p.reach is not None]
        return min(reaches, key=lambda r: (r[0], r[1]))[2] if reaches else self.first

    @property
    def reach(self) -> int | None:
        return self._tighter().reach

    @property
    def sinks(self) -> int:
        return self._tighter().sinks

    def retained(self, k_idx: Tensor, q: int) -> Tensor:
        return self.first.retained(k_idx, q) & self.second.retained(k_idx, q)

    @property
    def spec(self) -> str:
        return "&".join(f"({p.spec})" if p.operator == "|" else p.spec for p in (self.first, self.second))


def intersect(own: Pattern, other: Pattern) -> Pattern:
    """What a layer whose own pattern is ``own`` sees under an evaluation pattern ``other``: the
    keys visible under both. ``causal`` is the identity (every pattern is causal), two windows give
    the narrower window, equal patterns give themselves, anything else :class:`Both`. A ``pos=cache``
    sinks pattern combines only with ``causal`` (its rescoring assumes it is the layer's only rule)."""
    if own == other or other.name == "causal":
        return own
    if own.name == "causal":
        return other
    if own.name == other.name == "window":
        return own if own.values["W"] <= other.values["W"] else other
    for p in (own, other):
        if p.cache_positions:
            raise ValueError(f"pattern {p.spec} scores its sinks at cache positions and cannot be combined with "
                             f"{(other if p is own else own).spec}; use pos=text")
    return Both(own, other)


class Layered(Pattern):
    """One pattern per layer: what an evaluation pattern resolves to on a model whose layers differ
    (``lexkit.layouts``). Its ``spec`` is the evaluation's label (as the user wrote it, canonical);
    ``layers[i]`` is layer i's pattern, which the kernels and the cache use. A layered pattern has
    no single predicate (``visible`` raises); what callers ask of it is the union: ``reach`` is the
    largest layer reach (None when some layer is global), ``sinks`` the most sinks, and it scores at
    cache positions when some layer does."""

    name = "layered"

    def __init__(self, layers: tuple[Pattern, ...] | list[Pattern], label: str) -> None:
        super().__init__()
        self.layers = tuple(layers)
        self.label = label

    def visible(self, q_idx: Tensor, k_idx: Tensor) -> Tensor:
        raise TypeError(f"pattern {self.label!r} is one pattern per layer; ask a layer's (.layers[i])")

    @property
    def reach(self) -> int | None:
        reaches = [p.reach for p in self.layers]
        return None if any(r is None for r in reaches) else max(reaches)

    @property
    def sinks(self) -> int:
        return max(p.sinks for p in self.layers)

    @property
    def cache_positions(self) -> bool:
        return any(p.cache_positions for p in self.layers)

    @property
    def spec(self) -> str:
        return self.label

    def __repr__(self) -> str:
        return f"Layered({self.label!r}: {', '.join(p.spec for p in self.layers)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layered) and other.label == self.label and other.layers == self.layers

    def __hash__(self) -> int:
        return hash((self.label, self.layers))


def layer_patterns(pattern: Pattern, n_layers: int) -> tuple[Pattern, ...]:
    """The pattern of each of ``n_layers`` layers: a :class:`Layered` pattern's own, else the same
    pattern on every layer."""
    if isinstance(pattern, Layered):
        if len(pattern.layers) != n_layers:
            raise ValueError(f"pattern {pattern.spec!r} has {len(pattern.layers)} layers, the model {n_layers}")
        return pattern.layers
    return (pattern,) * n_layers


def create(spec: str | Pattern, *, default_window: int | None = None) -> Pattern:
    """Build a pattern from a spec: ``causal``, ``window:128``, ``window:W=128``, ``bca:256``, or
    patterns joined by ``|`` (:class:`Either`, attention-gym's ``or_masks``) and ``&`` (:class:`Both`,
    ``and_masks``), so that every pattern's ``spec`` reads back::

        pattern := term ('|' term)*        a|b|c is Either(Either(a, b), c)
        term    := atom ('&' atom)*        & binds tighter than |, as in Python
        atom    := NAME[:PARAMS] | '(' pattern ')'

    A pattern's W defaults to ``default_window`` (the model's training length) when the spec
    gives none; without either, ``ValueError``. An error in one operand is one line naming it.
    """
    if isinstance(spec, Pattern):
        return spec
    if isinstance(spec, str) and _GRAMMAR.search(spec):
        return _Reader(spec, default_window).read()
    return _named(spec, default_window)


def _named(spec: str, default_window: int | None) -> Pattern:
    """One registered pattern from ``NAME[:PARAMS]``, its None defaults set to ``default_window``."""
    name, items = split_spec(spec)
    cls = PATTERNS.get(name)
    values = parse_params(f"pattern {name}", cls.params, items, positional=cls.positional)
    for key, param in cls.params.items():
        if values[key] is None:
            if default_window is None:
                raise ValueError(
                    f"pattern {name} needs its {key} when no training length is known (e.g. {name}:128)"
                )
            values[key] = param.parse(f"pattern {name}", key, default_window)
    return cls(**values)


#: the characters of the composition grammar: its two operators and parentheses
_GRAMMAR = re.compile(r"([|&()])")  # a group: split keeps them
#: what joins two patterns: the combinator of each operator
_JOIN: dict[str, type[Pattern]] = {"|": Either, "&": Both}


class _Reader:
    """Recursive descent over the tokens of a composed spec (:func:`create`'s grammar): operators,
    parentheses and the operand texts between them (stripped; each read by :func:`_named`)."""

    def __init__(self, text: str, default_window: int | None) -> None:
        self.text, self.default_window = text, default_window
        self.tokens = [t for t in (piece.strip() for piece in _GRAMMAR.split(text)) if t]
        self.at = 0

    def read(self) -> Pattern:
        pattern = self.loose()
        if self.peek() is not None:  # `loose` stops early only at a ')'
            raise self.error("a ')' without its '('")
        return pattern

    def loose(self) -> Pattern:
        """pattern := term ('|' term)*"""
        return self.chain("|", self.tight)

    def tight(self) -> Pattern:
        """term := atom ('&' atom)*"""
        return self.chain("&", self.atom)

    def chain(self, operator: str, part) -> Pattern:
        """``part`` (operator ``part``)*, joined from the left."""
        pattern = part()
        while self.peek() == operator:
            self.at += 1
            pattern = self.join(operator, pattern, part())
        return pattern

    def atom(self) -> Pattern:
        """atom := NAME[:PARAMS] | '(' pattern ')', never followed by another atom."""
        token = self.peek()
        if token is None or token in "|&)":
            raise self.error(self.missing(token))
        self.at += 1
        if token == "(":
            pattern = self.loose()
            if self.peek() != ")":
                raise self.error("a '(' without its ')'")
            self.at += 1
        else:
            try:
                pattern = _named(token, self.default_window)
            except ValueError as exc:
                raise self.error(f"operand {token!r}: {exc}") from None
        if self.peek() == "(":
            raise self.error(f"a '(' right after {self.tokens[self.at - 1]!r}; join patterns with | or &")
        return pattern

    def join(self, operator: str, first: Pattern, second: Pattern) -> Pattern:
        """``Either`` or ``Both`` of two parts; a part scored at cache positions (``pos=cache``, whose
        rescoring assumes it is the layer's only rule) is refused, as :func:`intersect` does."""
        for part, other in ((first, second), (second, first)):
            if part.cache_positions:
                raise self.error(f"{part.spec} scores its sinks at cache positions and cannot be combined "
                                 f"with {other.spec}; use pos=text")
        return _JOIN[operator](first, second)

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def missing(self, token: str | None) -> str:
        """Where an operand is missing: ``nothing before '|'``, ``after``, ``between '|' and '|'``."""
        before = self.tokens[self.at - 1] if self.at else None
        where = (f"nothing before {token!r}" if before is None else f"nothing after {before!r}" if token is None
                 else f"nothing between {before!r} and {token!r}")
        return f"{where}; write A|B (either) or A&B (both), each a pattern ({', '.join(PATTERNS.names())})"

    def error(self, why: str) -> ValueError:
        return ValueError(f"pattern {self.text!r}: {why}")


def describe() -> list[tuple[str, str, str]]:
    return [(c.name, describe_params(c.params), c.summary) for c in PATTERNS]
