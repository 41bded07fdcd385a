"""Inference-time attention patterns: each is one mask predicate over query/key indices.

The predicate ``visible(q_idx, k_idx)`` (integer tensors that broadcast) feeds the dense additive
mask, FlexAttention's ``mask_mod`` and the chunked kernel alike. Indices count from the start of
the input (0 .. n-1), so a pattern's blocks do not move with a position ``offset``.

* ``causal``: n <= m.
* ``window:W``: causal and near, 0 <= m - n < W (seed 002's "super-strong baseline", W = the
  training length).
* ``bca:W``: blockwise causal attention (Sun et al. 2022, Sec. 3.3): blocks of W/2; each block sees
  itself causally and all of the previous block.

``reach`` bounds the distances a pattern can make visible (every visible pair has m - n < reach);
kernels use it to skip keys that can never be seen (O(n·W) cost for local patterns).
``retained(k_idx, q)`` says which keys some query at index >= q can still see: the KV cache
(``cache.py``) keeps exactly those, so a pattern that is not a plain suffix of recent keys (e.g. a
few always-visible first keys beside a window) plugs in by overriding it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from torch import Tensor

from ..specs import Param, describe_params, format_spec, parse_params, split_spec


class Pattern:
    """Base class: subclasses set ``name``, ``params`` and define :meth:`visible`."""

    name: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {}
    positional: ClassVar[str | None] = None
    summary: ClassVar[str] = ""

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
        Default from ``reach``: m - n < reach for some m >= q, i.e. n > q - reach (all keys when
        the reach is unbounded). Must be True for every key at index >= q (causal self-attention)."""
        reach = self.reach
        if reach is None:
            return k_idx >= k_idx.new_zeros(())
        return k_idx > q - reach

    @property
    def spec(self) -> str:
        """Canonical spec with W resolved: ``window:128``, ``bca:256``, ``causal``."""
        if self.positional is not None and len(self.params) == 1:
            return f"{self.name}:{self.values[self.positional]}"
        return format_spec(self.name, self.params, self.values)

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


_REGISTRY: dict[str, type[Pattern]] = {}


def register(cls: type[Pattern]) -> type[Pattern]:
    """Add a pattern class to the registry (usable as a decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, Pattern)) or not cls.name:
        raise TypeError(f"register expects a named Pattern subclass, got {cls!r}")
    _REGISTRY[cls.name] = cls
    return cls


@register
class Causal(Pattern):
    """Full causal attention: query m sees every key n <= m."""

    name = "causal"
    summary = "every earlier key (training's pattern)"

    def visible(self, q_idx: Tensor, k_idx: Tensor) -> Tensor:
        return causal(q_idx, k_idx)


@register
class Window(Pattern):
    """Sliding window: causal and near, 0 <= m - n < W (seed 002's super-strong baseline)."""

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
    params = {"W": Param(int, None, "twice the block size (default: the training length; even)", lambda x: x > 0 and x % 2 == 0, "a positive even integer")}
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


def names() -> list[str]:
    return list(_REGISTRY)


def create(spec: str | Pattern, *, default_window: int | None = None) -> Pattern:
    """Build a pattern from a spec: ``causal``, ``window:128``, ``window:W=128``, ``bca:256``.

    A pattern's W defaults to ``default_window`` (the model's training length) when the spec
    gives none; without either, ``ValueError``.
    """
    if isinstance(spec, Pattern):
        return spec
    name, items = split_spec(spec)
    if name not in _REGISTRY:
        raise ValueError(f"unknown attention pattern {name!r}; valid: {', '.join(_REGISTRY)}")
    cls = _REGISTRY[name]
    values = parse_params(f"pattern {name}", cls.params, items, positional=cls.positional)
    for key, param in cls.params.items():
        if values[key] is None:
            if default_window is None:
                raise ValueError(
                    f"pattern {name} needs its {key} when no training length is known (e.g. {name}:128)"
                )
            values[key] = param.parse(f"pattern {name}", key, default_window)
    return cls(**values)


def describe() -> list[tuple[str, str, str]]:
    return [(c.name, describe_params(c.params), c.summary) for c in _REGISTRY.values()]
