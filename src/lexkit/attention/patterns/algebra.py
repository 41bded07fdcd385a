"""Patterns compose as predicates do: :class:`Either` (or: attention-gym's ``or_masks``, a spec's
``a|b``) and :class:`Both` (and: a pattern inside a layer's own, a spec's ``a&b``); :func:`intersect` is
what a layer's own pattern and an evaluation pattern give together.

Each combinator derives ``reach``, ``sinks`` and ``retained`` from its parts, so the kernels' key
blocks, the block masks and the KV cache follow from the composition. (The spec's grammar, which
reads ``a|b`` and ``a&b`` back: :mod:`.grammar`.)
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from .base import Pattern


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
