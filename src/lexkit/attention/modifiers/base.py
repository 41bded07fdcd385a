"""The layer-modifier interface: a named, typed description of something a layer does besides its
position scheme and its pattern, and :class:`Scoring`, what a layer's score modifiers hand the
kernels.

A modifier acts at one **place** of a pre-LN layer (``x`` the residual stream, ``a = LN(x)``)::

    inputs   a -> a'          the normalized input of the attention and the feed-forward block
                              (token shift: the previous position's features)
    qkv      q, k, v -> ...   the projections, before the position transform
    scores   s -> f(s)        the pre-softmax scores: a factor per query (a temperature), an
                              elementwise function of the score (soft-capping) or of the score and
                              the positions of its query and key (scale-invariant attention), a
                              function of each query's whole row (the adaptive temperature), a
                              learned sink logit per head
    attention q, k, v -> y    how the scores become the output (an attention variant): the rows
                              the kernel mixes (:meth:`Modifier.prepare`: differential attention's
                              value pairs), the weights in place of the softmax
                              (:meth:`Modifier.weights`: stick-breaking) and what becomes of the
                              kernel's output (:meth:`Modifier.finish`: a norm per head)
    output   y -> y'          the attention output per head, before the output projection

and says what it needs: learned **state** (:meth:`Modifier.state`: a module or parameter the layer
registers under :attr:`Modifier.slot`, so its state-dict key is ``blocks.i.<slot>...``), a **carry**
across the pieces of a streamed sequence (:meth:`Modifier.inputs` / :meth:`Modifier.qkv` read and
write ``carry``, the layer's dict in the KV cache; None in a one-pass forward), and what a kernel or
the cache cannot run (:attr:`Modifier.flex_refusal`, :attr:`Modifier.stream_refusal`), what it
cannot share a layer with (:attr:`Modifier.excludes`), and at which lengths its settings make it do
nothing (:meth:`Modifier.inert_at`: ``topk:K`` with K at least the length).

A modifier is immutable and compared by its spec (``logn:L=64``, ``shift:0.25``, ``softcap:50``), so
two layers with the same scheme, pattern and modifiers are the same layer. The model's ``Block``,
the kernels (through :class:`Scoring`), the KV cache and the Hugging Face path read modifiers through
this interface only: a new modifier is one class in one file (``@lexkit.attention.modifiers.register``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from torch import Tensor, nn

from ...core.specs import Param, spec_text

PLACES = ("inputs", "qkv", "scores", "attention", "output")


class Shape:
    """The shape of the layer a modifier is built for: width, heads, head dim, training length, and
    the layer's 0-based index in its model (None where no one layer is meant: a check of the stack)."""

    def __init__(self, d_model: int, n_heads: int, train_len: int, layer: int | None = None) -> None:
        self.d_model, self.n_heads, self.train_len = int(d_model), int(n_heads), int(train_len)
        self.layer = None if layer is None else int(layer)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


class Modifier:
    """Base class: subclasses set ``name``, ``params``, ``place``, ``summary``, ``source`` and define
    the methods of their place. Construct from typed values (every parameter present)."""

    name: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {}
    #: the parameter a bare first value sets (``shift:0.25``); written bare in the spec
    positional: ClassVar[str | None] = None
    place: ClassVar[str] = "scores"
    summary: ClassVar[str] = ""
    source: ClassVar[str] = ""
    #: a layer takes at most one modifier of a group (``temperature``: one factor per query)
    group: ClassVar[str | None] = None
    #: parameters that default to the model's training length when the spec leaves them out
    train_len_params: ClassVar[tuple[str, ...]] = ()
    #: True when the modifier grows with the position and so belongs to a global layer only (a
    #: local layer's count of visible keys stops at its reach)
    global_only: ClassVar[bool] = False
    #: the layer attribute holding its learned state (:meth:`state`); None: it has none
    slot: ClassVar[str | None] = None
    #: why compiled FlexAttention cannot run it (None: it can)
    flex_refusal: ClassVar[str | None] = None
    #: why the KV cache cannot reproduce it exactly (None: it can)
    stream_refusal: ClassVar[str | None] = None
    #: why a compiled training step (:mod:`lexkit.training.compiled`) cannot trace it as one graph (None: it can)
    compile_refusal: ClassVar[str | None] = None
    #: the modifiers (by name or group) it cannot share a layer with, each with why
    excludes: ClassVar[dict[str, str]] = {}

    def __init__(self, **values: Any) -> None:
        missing = sorted(set(self.params) - set(values))
        if missing:
            raise TypeError(f"modifier {self.name} needs {', '.join(missing)}")
        self.values = dict(values)

    # -- identity ------------------------------------------------------------------------------
    @property
    def spec(self) -> str:
        """Canonical spec: non-default values, the positional one bare (``shift:0.25``)."""
        if self.positional is None:
            return spec_text(self.name, self.params, self.values)
        rest = {k: p for k, p in self.params.items() if k != self.positional}
        tail = spec_text(self.name, rest, self.values)[len(self.name) + 1:]
        value = self.values[self.positional]
        head = "" if value == self.params[self.positional].default else str(value)
        parts = [p for p in (head, tail) if p]
        return self.name + (":" + ",".join(parts) if parts else "")

    @property
    def full(self) -> str:
        """The spec with every parameter written out, defaults included (what a run records)."""
        written = ",".join(f"{key}={self.values[key]}" for key in self.params if self.values[key] is not None)
        return self.name + (f":{written}" if written else "")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Modifier) and other.spec == self.spec

    def __hash__(self) -> int:
        return hash(self.spec)

    def __repr__(self) -> str:
        return f"Modifier({self.spec!r})"

    # -- building ------------------------------------------------------------------------------
    def check(self, shape: Shape) -> None:
        """ValueError when this modifier cannot run on a layer of ``shape`` (default: it can)."""

    def state(self, shape: Shape) -> nn.Module | nn.Parameter | None:
        """The learned state a layer of ``shape`` registers under :attr:`slot` (None: none)."""
        return None

    def inert_at(self, n: int) -> str | None:
        """Why, on a sequence of ``n`` positions, this modifier with its settings leaves its layer
        exactly as the layer is without it (each query's weights the plain softmax's, each factor 1),
        as a clause (``K = 64 keeps every one of the at most 32 keys a query sees``); None: it acts
        there, or lexkit cannot say it does not (the default). Each modifier whose effect can vanish
        with its settings says when; :meth:`lexkit.layouts.LayerStack.inert` asks every layer's."""
        return None

    # -- what it does, by place (each modifier defines those of its place) -----------------------
    def inputs(self, h: Tensor, state: Any, part: str, carry: dict | None) -> Tensor:
        """place ``inputs``: h [b, n, d] the normalized input of ``part`` (``attn`` or ``ff``)."""
        return h

    def qkv(self, q: Tensor, k: Tensor, v: Tensor, state: Any, carry: dict | None,
            x: Tensor | None = None, pos: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """place ``qkv``: q, k, v [b, heads, n, head_dim] before the position transform; ``x`` [b, n, d]
        the layer's normalized input they were projected from (a data-dependent mix reads it); ``pos``
        [n] the queries' positions (a data-dependent temperature on q reads them)."""
        return q, k, v

    def query_scale(self, state: Any, pos: Tensor) -> Tensor | None:
        """place ``scores``: a factor on each query's whole score, [n] or [heads, n], from the query
        positions ``pos`` [n] (None: no factor)."""
        return None

    def score_fn(self, state: Any) -> Callable[[Tensor], Tensor] | None:
        """place ``scores``: an elementwise function of the (scaled) score, applied before the mask;
        written in torch ops, so it also runs inside FlexAttention's ``score_mod`` (None: none)."""
        return None

    def position_fn(self, state: Any) -> Callable[[Tensor, Tensor, Tensor], Tensor] | None:
        """place ``scores``: an elementwise function ``f(s, m, n)`` of the (scaled) score and the positions
        of its query m and key n (integer tensors that broadcast against s), applied after the factor per
        query and before :meth:`score_fn` and the mask; written in torch ops, so it also runs inside
        FlexAttention's ``score_mod``. Masked pairs (n > m) are masked after it (None: none)."""
        return None

    def row_fn(self, state: Any, training: bool) -> Callable[[Tensor, Tensor | None], Tensor] | None:
        """place ``scores``: a function ``f(s, sink)`` of each query's whole row of masked scores
        s [..., n_q, n_k] (invisible keys -inf; ``sink`` [..., n_q, 1] the sink logit's column, or None)
        returning the row the softmax takes; the last thing before the softmax. It sees every key a
        query attends to at once, so only the block computation runs it (the dense kernel as one block,
        the chunked kernel, the KV cache); compiled FlexAttention cannot (say so in
        :attr:`flex_refusal`). ``training``: whether the forward trains (None: nothing then, e.g. an
        inference-time temperature)."""
        return None

    def sink_logit(self, state: Any) -> Tensor | None:
        """place ``scores``: a learned logit per head [heads] of a virtual key with value 0 (None: none)."""
        return None

    def prepare(self, q: Tensor, k: Tensor, v: Tensor, state: Any) -> tuple[Tensor, Tensor, Tensor]:
        """place ``attention``: q, k, v [b, heads, n, head_dim] after the ``qkv`` modifiers, before
        the kernel (and its position transform): what the kernel and the KV cache hold. The value
        rows may be wider than head_dim (differential attention's pairs of heads)."""
        return q, k, v

    def weights(self, state: Any) -> Callable[..., Tensor] | None:
        """place ``attention``: how a block's scores become its attention weights, in place of the
        softmax (None: the softmax). The function takes scores [b, heads, n_q, n_k] (-inf where not
        visible), ``visible`` [n_q, n_k], the input indices q_idx [n_q], k_idx [n_k] (ascending) and
        the keyword ``carry`` (a dict the layer keeps from one block of queries to the next: fresh
        for each forward of the dense and chunked kernels, kept across the pieces of a sequence by
        the KV cache; blocks arrive in ascending query order; what selective attention's penalty
        per key needs) and returns weights [b, heads, n_q, n_k]; the block computation runs it (the
        dense and chunked kernels, the KV cache), so a query's visible keys are all in its block."""
        return None

    def finish(self, y: Tensor, x: Tensor, state: Any) -> Tensor:
        """place ``attention``: the kernel's output [b, heads, n, value dim] -> the layer's attention
        output [b, heads, n, head_dim], before the ``output`` modifiers; x [b, n, d] the layer's
        normalized input."""
        return y

    def output(self, y: Tensor, x: Tensor, state: Any) -> Tensor:
        """place ``output``: y [b, heads, n, head_dim] the attention output, x [b, n, d] the layer's
        normalized input."""
        return y


#: the places whose modifiers act inside the kernels (what :class:`Scoring` hands them)
KERNEL_PLACES = ("scores", "attention")


class Scoring:
    """What a layer's ``scores`` and ``attention`` modifiers do, in the words the kernels use: a
    factor per query (the product of every :meth:`Modifier.query_scale`), an elementwise function of
    the scaled score and its positions (each :meth:`Modifier.position_fn`, in order), one of the
    score alone (each :meth:`Modifier.score_fn`), a function of whole rows (each
    :meth:`Modifier.row_fn`), a learned sink logit per head, and the weights that replace the softmax
    (:meth:`Modifier.weights`; None: the softmax). The kernels apply them in that order.

    ``state_of(modifier)`` gives a modifier's state when it is asked for (the layer's registered
    module or parameter, looked up at call time: under FSDP2 it is gathered only inside the
    layer's forward; a Hugging Face layer's sink logits of the current call)."""

    def __init__(self, modifiers: Sequence[Modifier] = (), state_of: Callable[[Modifier], Any] | None = None) -> None:
        self.modifiers = tuple(m for m in modifiers if m.place in KERNEL_PLACES)
        self.state_of = state_of or (lambda modifier: None)

    @classmethod
    def of(cls, *modifiers: Modifier, states: Mapping[str, Any] | None = None) -> Scoring:
        """A scoring from modifiers and their states by slot (a test, the Hugging Face path)."""
        states = dict(states or {})
        return cls(modifiers, lambda m: states.get(m.slot) if m.slot is not None else None)

    def __bool__(self) -> bool:
        return bool(self.modifiers)

    @property
    def key(self) -> tuple:
        """What two layers share when they score alike: the specs, and for learned state its identity."""
        return tuple((m.spec, id(self.state_of(m)) if m.slot is not None else None) for m in self.modifiers)

    def query_scale(self, pos: Tensor) -> Tensor | None:
        """The factor per query [n] or per head and query [heads, n] (None: none)."""
        out = None
        for m in self.modifiers:
            scale = m.query_scale(self.state_of(m), pos)
            if scale is not None:
                out = scale if out is None else out * scale
        return out

    @property
    def score_fn(self) -> Callable[[Tensor], Tensor] | None:
        """Every :meth:`Modifier.score_fn`, in order (None: none)."""
        return _chain([m.score_fn(self.state_of(m)) for m in self.modifiers])

    @property
    def position_fn(self) -> Callable[[Tensor, Tensor, Tensor], Tensor] | None:
        """Every :meth:`Modifier.position_fn`, in order (None: none)."""
        return _chain([m.position_fn(self.state_of(m)) for m in self.modifiers])

    def row_fn(self, training: bool) -> Callable[[Tensor, Tensor | None], Tensor] | None:
        """The function of whole rows of a forward that trains or not (None: none)."""
        return _chain([m.row_fn(self.state_of(m), training) for m in self.modifiers])

    @property
    def weights(self) -> Callable[..., Tensor] | None:
        """The function that turns a block's scores into weights in place of the softmax (None: none)."""
        return next((fn for m in self.modifiers if (fn := m.weights(self.state_of(m))) is not None), None)

    @property
    def needs_scores(self) -> bool:
        """Whether a kernel must hold the scores themselves: an elementwise function of them or
        weights other than the softmax (no SDPA mask can express either: the dense kernel runs the
        block computation as one block). A function of whole rows needs them too (:meth:`row_fn`,
        asked per forward: it may act at inference only)."""
        return self.score_fn is not None or self.position_fn is not None or self.weights is not None

    def needs_block(self, training: bool) -> bool:
        """Whether a forward that trains (or not) must run the block computation: it needs the scores
        (:attr:`needs_scores`) or a function of whole rows (:meth:`row_fn`)."""
        return self.needs_scores or self.row_fn(training) is not None

    def sink(self) -> Tensor | None:
        """The sink logit per head [heads] (None: none)."""
        for m in self.modifiers:
            logit = m.sink_logit(self.state_of(m))
            if logit is not None:
                return logit
        return None

    @property
    def flex_refusal(self) -> str | None:
        return next((m.flex_refusal for m in self.modifiers if m.flex_refusal), None)


def _chain(fns: Sequence[Callable | None]) -> Callable | None:
    """The functions that are given, applied one after another to their first argument (the
    scores), the others passed to each as they are: ``f2(f1(s, *rest), *rest)``; None when none is."""
    given = [fn for fn in fns if fn is not None]
    if len(given) <= 1:
        return given[0] if given else None

    def composed(scores: Tensor, *rest: Tensor | None) -> Tensor:
        for fn in given:
            scores = fn(scores, *rest)
        return scores

    return composed


def rows(scale: Tensor) -> Tensor:
    """A scale [n] or [heads, n] as a factor on score rows [..., heads, n, keys]: [n, 1] or [heads, n, 1]."""
    return scale.unsqueeze(-1)


