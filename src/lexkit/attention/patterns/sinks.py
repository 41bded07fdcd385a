"""The first keys, kept at any distance:

* ``first:K=4``: the first K keys, causally, n <= m and n < K (the sinks alone: a part to compose,
  ``first:4|window:64`` is ``sinks:64`` by mask).
* ``sinks:W,K=4``: attention sinks (StreamingLLM, Xiao et al. 2023): the first K keys always
  visible beside a window of W keys, n <= m and (n < K or m - n < W): ``Either(First(K), Window(W))``.
  Positions ``pos=text`` (the text's own positions) or ``pos=cache`` (StreamingLLM's: positions
  assigned within a cache of K + W slots, so a sink key n is scored at distance min(m, K + W - 1) - n).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from ...core.specs import Param, positive
from .algebra import Either
from .base import Pattern, causal, register
from .window import Window


@register
class First(Pattern):
    """The first K keys, causally: n <= m and n < K (a combinator part: the attention sinks of
    StreamingLLM are ``Either(First(K), Window(W))``, ``first:4|window:64``). Every visible pair has
    n < K, so its reach is 0 and its sinks K."""

    name = "first"
    params = {"K": Param(int, 4, "number of visible first keys (StreamingLLM's 4)", positive, "> 0")}
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
        "W": Param(int, None, "window size, keys including self (default: the training length)", positive, "> 0"),
        "K": Param(int, 4, "number of always-visible first keys (the paper's 4)", positive, "> 0"),
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
