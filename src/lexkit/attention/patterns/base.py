"""The pattern interface and the registry: :class:`Pattern` (one mask predicate and what the kernels
and the KV cache derive from it), the predicates the rooms share (``causal``, ``near``) and
:data:`PATTERNS`.

The predicate ``visible(q_idx, k_idx)`` (integer tensors that broadcast) feeds the dense additive
mask, FlexAttention's ``mask_mod`` and the chunked kernel alike. Indices count from the start of
the input (0 .. n-1), so a pattern's blocks do not move with a position ``offset``.

``reach`` bounds the distances a pattern can make visible beside its ``sinks`` leading keys (every
visible pair has m - n < reach or n < sinks); kernels use the two to skip keys that can never be
seen (O(n·(W + K)) cost for local patterns), and a streaming KV cache keeps exactly those keys: the
first ``sinks`` and the last ``reach``. ``retained(k_idx, q)`` says which keys some query at index
>= q can still see (by default the sinks and the keys within ``reach``; BCA and chunk override it):
the KV cache (``lexkit.attention.cache``) keeps exactly those.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from ...core.registry import Registry
from ...core.specs import Param, describe_params, spec_text


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


#: Every attention pattern by name; ``@lexkit.attention.register`` adds a user's own.
PATTERNS: Registry[type[Pattern]] = Registry("attention pattern", Pattern)
register = PATTERNS.register
names = PATTERNS.names


def describe() -> list[tuple[str, str, str]]:
    """(name, parameters with defaults, summary) of every registered pattern, in registry order."""
    return [(c.name, describe_params(c.params), c.summary) for c in PATTERNS]
