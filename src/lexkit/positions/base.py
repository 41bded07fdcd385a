"""The position-scheme interface, spec parsing and the registry.

A scheme does up to three things, each in one place:

* ``embed(pos)``: absolute schemes return a ``[n, d_model]`` table added to token embeddings;
* ``transform_qk(q, k, q_pos, k_pos)``: rotary schemes rotate (and scale) queries and keys;
* ``bias(head, dist)``: bias schemes return the additive pre-softmax bias as a function of head
  index and distance ``d = m - n >= 0``; a scheme with ``query_bias = True`` (FIRE) defines
  ``bias(head, dist, pos)``, a bias of the query's position m too. The kernels reach it through one
  object per forward, :class:`ForwardBias` (:meth:`Scheme.forward_bias`): the same formula with its
  per-forward pieces evaluated once (:meth:`Scheme.bias_fn`), which feeds the dense additive mask,
  the chunked kernel, the KV cache and the FlexAttention ``score_mod``; a bias of the distance
  alone is also tabulated once per forward over its distances (:meth:`Scheme.bias_table`) and
  gathered. The resolution instrument reads it through :meth:`Scheme.scores`.

:meth:`Scheme.scores` is the dense reference path every kernel and instrument is checked against.
A scheme whose score is not (T q)·(T k) + bias (``separable = False``: ReRoPE, and the
data-dependent CoPE and forgetting gates) overrides it and runs on the dense and chunked kernels.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from ..core.device import device_of
from ..core.registry import Registry
from ..core.specs import Param, describe_params, parse_params, spec_text, split_spec

FAMILIES = ("none", "absolute", "rotary", "bias", "contextual")


class Scheme(nn.Module):
    """Base class of every position scheme. Subclasses set the class variables and override
    whichever of ``embed``, ``transform_qk`` and ``bias`` their family uses."""

    name: ClassVar[str] = ""
    family: ClassVar[str] = "none"
    params: ClassVar[dict[str, Param]] = {}
    summary: ClassVar[str] = ""
    #: True when scores depend on positions only through m - n (translation invariant).
    relative: ClassVar[bool] = True
    #: True when the class defines ``bias`` (derived in ``__init_subclass__``, never declared).
    has_bias: ClassVar[bool] = False
    #: The longest span of query positions one ``transform_qk`` call may cover in float32
    #: (None: any): every call's query positions satisfy max - min < max_query_span. xPos needs
    #: this; :meth:`scores` and the kernels split queries by position (not by count) to respect it.
    max_query_span: ClassVar[int | None] = None
    #: False when scores are not (T q)·(T k) + bias(m - n) for one position transform T (ReRoPE,
    #: CoPE, the forgetting gates): such a scheme runs through :meth:`scores` only (dense reference
    #: and chunked kernels); ``scores_only`` says why, in the words kernel 'flex' refuses it with.
    separable: ClassVar[bool] = True
    scores_only: ClassVar[str] = "it needs two score passes per query (a different relative position for some keys)"
    #: True when the class defines :meth:`context` (derived in ``__init_subclass__``, never declared)
    has_context: ClassVar[bool] = False
    #: parameters that default to the model's training length when the spec leaves them out
    train_len_params: ClassVar[tuple[str, ...]] = ()
    #: True when the bias depends on the query's position m as well as on m - n (FIRE's
    #: normaliser): the class defines ``bias(head, dist, pos)`` and no distance table exists.
    query_bias: ClassVar[bool] = False
    #: True when every layer gets its own instance (its own parameters, under that layer's
    #: state-dict keys); False: one instance shared by every layer with the same spec (KERPLE and
    #: T5 share theirs across layers, as their reference code does).
    per_layer: ClassVar[bool] = False
    #: why a compiled training step (:mod:`lexkit.training.compiled`) cannot trace it as one graph (None: it can)
    compile_refusal: ClassVar[str | None] = None

    @classmethod
    def fills(cls, given: set[str], values: dict[str, Any]) -> tuple[str, ...]:
        """The ``train_len_params`` that take the training length when a spec gives the keys
        ``given`` (those it leaves out); a subclass drops one that means nothing for the parameter
        ``values`` (an unscaled RoPE's ``original_len``)."""
        return tuple(key for key in cls.train_len_params if key not in given)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.has_bias = cls.bias is not Scheme.bias
        cls.has_context = cls.context is not Scheme.context

    def __init__(self, n_heads: int, head_dim: int, **values: Any) -> None:
        super().__init__()
        if n_heads <= 0 or head_dim <= 0:
            raise ValueError(f"{self.name}: n_heads and head_dim must be positive, got {n_heads}, {head_dim}")
        self.n_heads = n_heads
        self.head_dim = head_dim
        self.values = dict(values)

    # -- what a scheme does -------------------------------------------------------------------
    def embed(self, pos: Tensor) -> Tensor | None:
        """``[n] -> [n, d_model]`` added to token embeddings, or None (not an absolute scheme)."""
        return None

    def transform_qk(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, Tensor]:
        """Queries and keys after the scheme's position transform (identity by default).

        q: [..., n_q, head_dim], k: [..., n_k, head_dim]; q_pos: [n_q], k_pos: [n_k] integer.
        """
        return q, k

    def bias(self, head: Tensor, dist: Tensor) -> Tensor:
        """Additive bias for integer ``head`` (0-based) and distance ``dist >= 0``, broadcast. A
        scheme with ``query_bias`` defines ``bias(head, dist, pos)``, ``pos`` the query's position."""
        raise NotImplementedError(f"{self.name} has no bias")

    def bias_fn(self, n: int, device: torch.device | str | None = None) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
        """The bias as ``f(head, dist, pos)`` for one forward over distances 0 .. n-1 (``pos``: the
        query's position; a bias of the distance alone ignores it), written in torch ops that
        broadcast, so the same ``f`` runs on ``[H, 1, 1] x [n_q, n_k] x [n_q, 1]`` index tensors
        (dense, chunked, the cache) and on the scalar indices inside a FlexAttention ``score_mod``.
        What depends on neither head nor distance is evaluated once here: closed forms capture
        per-head ``[H]`` vectors (a scalar load per kernel program), table schemes a distance table
        with integer indices. Gradients reach learnable parameters through ``f`` exactly as through
        :meth:`bias`. Default: :meth:`bias`."""
        if self.query_bias:
            return self.bias
        bias = self.bias

        def distance_only(head: Tensor, dist: Tensor, pos: Tensor | None = None) -> Tensor:
            return bias(head, dist)

        return distance_only

    def forward_bias(self, n: int, device: torch.device | str | None = None) -> ForwardBias | None:
        """This forward's bias over distances 0 .. n-1 for every kernel (None: no bias): its
        :meth:`bias_fn`, and for a bias of the distance alone its :meth:`bias_table`."""
        if not self.has_bias:
            return None
        device = device if device is not None else device_of(self)
        table = None if self.query_bias else self.bias_table(n, device=device)
        return ForwardBias(self.bias_fn(n, device), torch.arange(self.n_heads, device=device), table)

    def context(self, x: Tensor, previous: Tensor | None = None) -> Tensor | None:
        """A per-layer context from the layer's normalized input ``x`` [b, n, d_model]: rows
        [b, heads, n, c], one per token, computed once per layer and forward, which the kernels
        slice like keys and hand to :meth:`scores` (the forgetting gates' log-forget prefix sums).
        ``previous`` [b, heads, 1, c]: the last row of the pieces before (a KV cache continuing a
        sequence; None at its start). None for a scheme that reads only q, k and positions."""
        return None

    def constrain_(self) -> None:
        """Clamp learnable parameters into their valid range in place (after optimizer steps)."""

    # -- derived, shared by all schemes -------------------------------------------------------
    def bias_table(self, n: int, device: torch.device | str | None = None) -> Tensor:
        """``[n_heads, n]``: the bias at distances 0 .. n-1 for every head (one evaluation of
        :meth:`bias`, gathered by the kernels). Differentiable for learnable biases. Only a bias of
        the distance alone has one (``query_bias`` schemes: ValueError)."""
        if self.query_bias:
            raise ValueError(f"{self.spec}: the bias depends on the query's position; it has no distance table")
        device = device if device is not None else device_of(self)
        heads = torch.arange(self.n_heads, device=device)[:, None]
        dist = torch.arange(n, device=device)[None, :]
        return self.bias(heads, dist).to(torch.float32)

    def scores(
        self,
        q: Tensor,
        k: Tensor,
        q_pos: Tensor,
        k_pos: Tensor,
        *,
        transformed: bool = False,
        bias: ForwardBias | None = None,
        visible: Tensor | None = None,
        context: tuple[Tensor, Tensor] | None = None,
    ) -> Tensor:
        """Dense pre-softmax scores, the reference path.

        q: [batch, heads, n_q, head_dim], k: [batch, heads, n_k, head_dim], q_pos: [n_q],
        k_pos: [n_k] -> [batch, heads, n_q, n_k] = (T q)·(T k) / sqrt(head_dim) + bias(m - n),
        where T is the scheme's transform (and the bias may read the query's position m). Keys
        after the query (m < n) get the bias of distance 0; every causal pattern masks them.

        Kernels that score one block at a time may pass q and k already transformed
        (``transformed=True``; only for schemes whose transform is position-wise, i.e.
        ``max_query_span is None``) and this forward's :meth:`forward_bias` (covering every
        distance in the block), so nothing is recomputed per block. ``visible`` [n_q, n_k] (the
        pattern's mask of the block) and ``context`` (the block's query and key rows of
        :meth:`context`) are for the data-dependent schemes; the others ignore them.
        """
        q_pos = torch.as_tensor(q_pos, device=q.device)
        k_pos = torch.as_tensor(k_pos, device=k.device)
        span = self.max_query_span
        if transformed:
            out = q @ k.transpose(-1, -2)
        elif span is None or q_pos.numel() == 0 or int(q_pos.max() - q_pos.min()) < span:
            tq, tk = self.transform_qk(q, k, q_pos, k_pos)
            out = tq @ tk.transpose(-1, -2)
        else:  # xPos: one transform per group of queries whose *positions* lie within one span
            ascending = bool((q_pos[1:] >= q_pos[:-1]).all())
            order = None if ascending else torch.argsort(q_pos, stable=True)
            sorted_pos = q_pos if order is None else q_pos[order]
            parts, start = [], 0
            while start < len(sorted_pos):
                stop = int(torch.searchsorted(sorted_pos, sorted_pos[start : start + 1] + span))
                sel = slice(start, stop) if order is None else order[start:stop]
                tq, tk = self.transform_qk(q[..., sel, :], k, q_pos[sel], k_pos)
                parts.append(tq @ tk.transpose(-1, -2))
                start = stop
            out = torch.cat(parts, dim=-2)
            if order is not None:
                out = out[..., torch.argsort(order), :]
        out = out / math.sqrt(self.head_dim)  # [b, h, n_q, n_k]
        if self.has_bias:
            dist = (q_pos[:, None] - k_pos[None, :]).clamp_min(0)  # [n_q, n_k]
            if bias is not None:
                added = bias.block(q_pos, dist)  # [H, n_q, n_k]: this forward's bias, gathered or evaluated
            else:  # the reference: the bias function at the scheme's own precision
                fn = self.bias_fn(int(dist.max()) + 1 if dist.numel() else 1, q.device)
                added = fn(torch.arange(self.n_heads, device=q.device)[:, None, None], dist[None], q_pos[None, :, None])
            out = out + added.to(out.dtype)
        return out

    @property
    def spec(self) -> str:
        """Canonical spec string (defaults omitted)."""
        return spec_text(self.name, self.params, self.values)

    def extra_repr(self) -> str:
        return f"spec={self.spec!r}, n_heads={self.n_heads}, head_dim={self.head_dim}"


class ForwardBias:
    """One forward's additive bias, as every kernel reads it (:meth:`Scheme.forward_bias`).

    ``fn(head, dist, pos)`` is the scheme's :meth:`Scheme.bias_fn` (torch ops that broadcast, so it
    also runs on FlexAttention's scalar indices); ``table`` [H, n] its values at distances 0 .. n-1
    when the bias depends on the distance alone (one evaluation per forward, then gathers), None for
    a bias of the query's position too. :meth:`block` is the bias of a block of queries either way.
    """

    def __init__(self, fn: Callable[[Tensor, Tensor, Tensor], Tensor], heads: Tensor, table: Tensor | None) -> None:
        self.fn, self.heads, self.table = fn, heads, table  # heads: [H] 0 .. H-1

    def covers(self, n: int) -> bool:
        """Whether distances 0 .. n-1 are all defined (a table has a width; a function has none)."""
        return self.table is None or self.table.shape[1] >= n

    def block(self, q_pos: Tensor, dist: Tensor) -> Tensor:
        """[H, n_q, n_k] float32: the bias of queries at positions ``q_pos`` [n_q] and distances
        ``dist`` [n_q, n_k] (>= 0)."""
        if self.table is not None:
            return self.table[:, dist]  # the same bias() gathered
        return self.fn(self.heads[:, None, None], dist[None], q_pos[None, :, None]).to(torch.float32)


# -- registry ----------------------------------------------------------------------------------
def _check_family(cls: type[Scheme]) -> None:
    if cls.family not in FAMILIES:
        raise ValueError(f"{cls.__name__}: family {cls.family!r} is not one of {', '.join(FAMILIES)}")


#: Every position scheme by name. Users add theirs with ``@lexkit.positions.register`` in their own
#: module and load it with the CLI's ``--import MODULE``.
SCHEMES: Registry[type[Scheme]] = Registry("position scheme", Scheme, _check_family)
register = SCHEMES.register
names = SCHEMES.names
get = SCHEMES.get


def parse(spec: str) -> tuple[type[Scheme], dict[str, Any]]:
    """Spec string -> (class, typed parameter values with defaults)."""
    name, items = split_spec(spec)
    cls = get(name)
    values = parse_params(f"scheme {name}", cls.params, items)
    if "scaling" in cls.params:  # a RoPE family: parameters given that change nothing are refused
        from .scaling import unused

        unused(f"scheme {name}", {item.partition("=")[0].strip() for item in items}, values)
    return cls, values


def canonical(spec: str) -> str:
    cls, values = parse(spec)
    return spec_text(cls.name, cls.params, values)


def pin(spec: str, length: int) -> str:
    """The canonical spec with every parameter that defaults to the training length written out at
    ``length`` (``rerope`` -> ``rerope:w=64``; ``rope`` stays ``rope``): what a model trained at
    that length runs, recorded so that a later default or a longer fine-tune cannot move it."""
    cls, values = parse(spec)
    for key in cls.fills({item.partition("=")[0].strip() for item in split_spec(spec)[1]}, values):
        values[key] = int(length)
    return spec_text(cls.name, cls.params, values)


def full(spec: str, length: int) -> str:
    """The spec with every parameter written out, defaults included (None values left out), at
    training length ``length`` (:func:`pin`): what a run records, so a later change of a default
    cannot change what it runs (``rope`` -> ``rope:base=10000.0,scaling=none``)."""
    cls, values = parse(pin(spec, length))
    written = ",".join(f"{key}={_text(values[key])}" for key in cls.params if values[key] is not None)
    return cls.name + (f":{written}" if written else "")


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def build(name: str, values: dict[str, Any], n_heads: int, head_dim: int) -> Scheme:
    """A scheme from typed parameter values, no spec text (what a config of fields builds: the
    conformance suite's reference): each value checked as its spec's would be, the others at their
    defaults, refused where :func:`create` refuses (``build("rope", {"base": 5e5}, 1, 64)`` is
    ``create("rope:base=500000", 1, 64)``)."""
    cls = get(name)
    owner = f"scheme {name}"
    for key in values:
        if key not in cls.params:
            raise ValueError(f"{owner}: unknown parameter {key!r}; valid keys: {', '.join(cls.params) or 'none'}")
    typed = {key: param.parse(owner, key, values[key]) if key in values else param.default
             for key, param in cls.params.items()}
    if "scaling" in cls.params:  # as parse: parameters given that change nothing are refused
        from .scaling import unused

        unused(owner, set(values), typed)
    return cls(n_heads, head_dim, **typed)


def create(spec: str, n_heads: int, head_dim: int, *, max_len: int | None = None) -> Scheme:
    """Build a scheme from its spec string, e.g. ``create("xpos:gamma=0.5", n_heads=8, head_dim=64)``.

    ``max_len`` (the training length) fills the scheme's ``train_len_params`` its spec leaves out:
    ``learned``'s table size, a scaled RoPE's ``original_len``, ReRoPE's ``w``.
    """
    cls, values = parse(spec)
    given = {item.partition("=")[0].strip() for item in split_spec(spec)[1]}
    if max_len is not None:
        for key in cls.train_len_params:
            if key not in given:
                values[key] = int(max_len)
    return cls(n_heads, head_dim, **values)


def describe() -> list[tuple[str, str, str, str]]:
    """(name, family, parameters with defaults, summary) for every registered scheme."""
    return [(c.name, c.family, describe_params(c.params), c.summary) for c in SCHEMES]
