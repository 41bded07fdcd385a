"""Attention logit soft-capping (Gemma 2, transformers' ``attn_logit_softcapping``): every score s
becomes C·tanh(s / C) after the temperature, before the mask: near s for |s| << C, bounded by ±C.

:func:`soft_cap` is the one definition the block computation (dense and chunked kernels, the KV
cache) and FlexAttention's ``score_mod`` both use."""

from __future__ import annotations

import torch
from torch import Tensor

from ...core.specs import Param, positive, spec_number
from .base import Modifier


def soft_cap(scores: Tensor, cap: float) -> Tensor:
    """s -> cap·tanh(s / cap)."""
    return torch.tanh(scores / cap) * cap


class SoftCap(Modifier):
    """Logit soft-capping C·tanh(s/C) (Gemma 2)."""

    name = "softcap"
    params = {"C": Param(float, None, "the cap C (Gemma 2: 50)", positive, "> 0")}
    positional = "C"
    place = "scores"
    summary = "C·tanh(s/C) on every score (Gemma 2)"
    source = "Gemma Team 2024, Gemma 2 technical report (attn_logit_softcapping)"

    def __init__(self, **values) -> None:
        if values.get("C") is None:
            raise ValueError("softcap needs its cap C (e.g. softcap:50)")
        super().__init__(**values)

    @property
    def spec(self) -> str:
        return f"softcap:{spec_number(self.values['C'])}"

    def score_fn(self, state):
        cap = float(self.values["C"])
        return lambda scores: soft_cap(scores, cap)
