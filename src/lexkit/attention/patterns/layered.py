"""One pattern per layer: what an evaluation pattern resolves to on a model whose layers differ
(``lexkit.layouts``), and :func:`layer_patterns`, each layer's pattern of any pattern."""

from __future__ import annotations

from torch import Tensor

from .base import Pattern


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
