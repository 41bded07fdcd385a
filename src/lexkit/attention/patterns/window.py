"""``window:W``: causal and near, 0 <= m - n < W (the "super-strong baseline" of the essay *The Path to
the Transformer, Part 7: Length Extrapolation and Local Attention*; W = the training length).

lexkit's window convention: ``window:W`` (and ``sinks:W``) show W keys *including the query itself*
(HF's sliding window; attention-gym's ``sliding_window(W)`` shows W + 1).
"""

from __future__ import annotations

from torch import Tensor

from ...core.specs import Param, positive
from .base import Pattern, causal, near, register


@register
class Window(Pattern):
    """Sliding window: causal and near, 0 <= m - n < W (the essay's super-strong baseline)."""

    name = "window"
    params = {"W": Param(int, None, "window size (default: the training length)", positive, "> 0")}
    positional = "W"
    summary = "causal and 0 <= m-n < W: the super-strong baseline"

    def visible(self, q_idx: Tensor, k_idx: Tensor) -> Tensor:
        return causal(q_idx, k_idx) & near(q_idx, k_idx, self.values["W"])

    @property
    def reach(self) -> int:
        return self.values["W"]
