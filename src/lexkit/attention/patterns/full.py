"""``causal``: full causal attention, query m sees every key n <= m (training's pattern; every other
pattern is inside it)."""

from __future__ import annotations

from torch import Tensor

from .base import Pattern, causal, register


@register
class Causal(Pattern):
    """Full causal attention: query m sees every key n <= m."""

    name = "causal"
    summary = "every earlier key (training's pattern)"

    def visible(self, q_idx: Tensor, k_idx: Tensor) -> Tensor:
        return causal(q_idx, k_idx)
