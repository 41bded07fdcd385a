"""Absolute schemes: ``none`` (NoPE), ``sinusoidal`` and ``learned``.

Each adds (or not) a ``[n, d_model]`` table to the token embeddings; attention scores are then
plain ``q·k / sqrt(head_dim)``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..core.specs import Param, positive
from .base import Scheme, register


@register
class NoPE(Scheme):
    """No position information: order comes only from the causal mask (Kazemnejad et al. 2023)."""

    name = "none"
    family = "none"
    summary = "no position encoding; order only from the causal mask"


def sinusoid_table(pos: Tensor, dim: int, base: float = 10000.0) -> Tensor:
    """Vaswani et al. (2017), Sec. 3.5: PE[p, 2i] = sin(p / base^(2i/dim)), PE[p, 2i+1] = cos(...).

    pos: [n] -> [n, dim], computed in float64 and cast to float32 (exact far out).
    """
    i = torch.arange(0, dim, 2, dtype=torch.float64, device=pos.device)  # [dim/2]
    angle = pos.to(torch.float64)[:, None] / base ** (i / dim)  # [n, dim/2]
    table = torch.zeros(pos.shape[0], dim, dtype=torch.float64, device=pos.device)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : dim // 2])
    return table.to(torch.float32)


@register
class Sinusoidal(Scheme):
    """Fixed sin/cos table added to token embeddings (Vaswani et al. 2017, Sec. 3.5)."""

    name = "sinusoidal"
    family = "absolute"
    relative = False
    params = {"base": Param(float, 10000.0, "wavelength base", positive, "> 0")}
    summary = "Vaswani sin/cos table added to the token embeddings"

    def embed(self, pos: Tensor) -> Tensor:
        return sinusoid_table(pos, self.n_heads * self.head_dim, self.values["base"])  # [n, d]


@register
class Learned(Scheme):
    """A learned ``[max_len, d_model]`` table added to token embeddings (GPT-2). Undefined past
    ``max_len``: asking for a later position raises ``ValueError`` (no silent clamping)."""

    name = "learned"
    compile_refusal = "checks its positions against its table on the host (a graph break)"
    family = "absolute"
    relative = False
    train_len_params = ("max_len",)
    params = {"max_len": Param(int, 1024, "table size (defaults to the training length)", positive, "> 0")}
    summary = "learned table added to the token embeddings; undefined past max_len"

    def __init__(self, n_heads: int, head_dim: int, **values) -> None:
        super().__init__(n_heads, head_dim, **values)
        self.table = nn.Parameter(torch.randn(values["max_len"], n_heads * head_dim) * 0.02)

    def embed(self, pos: Tensor) -> Tensor:
        if pos.numel() and (int(pos.min()) < 0 or int(pos.max()) >= self.values["max_len"]):
            bad = int(pos.min()) if int(pos.min()) < 0 else int(pos.max())
            raise ValueError(
                f"learned positions cover 0..{self.values['max_len'] - 1}; position {bad} is "
                f"{'before' if bad < 0 else 'past'} the table (train with a larger max_len, or use a "
                f"relative scheme)"
            )
        return self.table[pos]  # [n, d]
