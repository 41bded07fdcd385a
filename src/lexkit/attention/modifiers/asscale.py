"""ASEntmax's adaptive length scale (Vasylenko, Pitorro, Martins, Treviso, ICLR 2026, "Long-Context
Generalization with Sparse Attention", arXiv 2506.16640; reference code deep-spin/asentmax): every
score of query i in head h is multiplied by a learned, data-dependent function of its position::

    λ_ih = δ + softplus(w_β,h · x_i) · ln(m_i + 2)^γ_ih,    γ_ih = 2·tanh(w_γ,h · x_i)
    z_ij <- λ_ih · z_ij

x_i the layer's normalized input, m_i the query's position, δ = ``delta`` (1); the weights w_β, w_γ
[H, d] start at zero, so λ starts at δ + ln 2 for every query (γ = 0). ``+entmax+asscale`` is
ASEntmax (α-entmax on the scaled scores, lexkit.attention.modifiers.entmax); beside the softmax it is a
data-dependent SSMax. Checked against the authors' ``_apply_length_scaling`` (``adapt-softplus-tanh``,
δ 1, γ range 2) on the same weights, cached queries included (tests/test_asscale.py). One choice
differs: their two projections keep PyTorch's default Linear initialization, lexkit's start at zero
(the independent reproduction, jtaylor-eng/asentmax, trained only from zero).

Applied to the queries before the position transform (place ``qkv``: q_i <- λ_i q_i, which scales
q_i·k_j, rotated or not, exactly); a bias a scheme adds to the scores is not scaled (lexkit's
choice). It grows with the position, so it belongs to a global layer and is the layer's one
temperature (group ``temperature``). λ depends on the query's own input and position only, so the KV
cache, the chunked kernel and flex run it as one pass. Learned state: ``blocks.i.temperature``
(``beta``, ``gamma``: Linear(d, H), no bias)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...core.specs import Param, positive
from .base import Modifier, Shape


class ASScaleState(nn.Module):
    """w_β and w_γ per head: Linear(d_model, H) each, no bias, zero at initialization."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.beta = nn.Linear(d_model, n_heads, bias=False)
        self.gamma = nn.Linear(d_model, n_heads, bias=False)
        nn.init.zeros_(self.beta.weight)
        nn.init.zeros_(self.gamma.weight)


def as_scale(x: Tensor, pos: Tensor, state: ASScaleState, delta: float) -> Tensor:
    """λ [b, H, n] from the layer's input x [b, n, d] and the query positions pos [n] (module docstring)."""
    beta = F.softplus(state.beta(x).float())  # [b, n, H]
    gamma = 2.0 * torch.tanh(state.gamma(x).float())
    length = torch.log(pos.to(torch.float32).clamp_min(0) + 2.0)[None, :, None]  # [1, n, 1]: ln(m + 2) > 0
    return (delta + beta * length.pow(gamma)).transpose(1, 2)  # [b, H, n]


class ASScale(Modifier):
    """q_i <- (δ + softplus(w_β·x_i)·ln(m_i + 2)^(2 tanh(w_γ·x_i))) q_i per head (ASEntmax's scale)."""

    name = "asscale"
    params = {"delta": Param(float, 1.0, "δ, the scale's floor", positive, "> 0")}
    place = "qkv"
    group = "temperature"
    global_only = True
    slot = "temperature"
    summary = "z ← (δ + softplus(w_β·x)·ln(m+2)^(2tanh(w_γ·x)))·z per query and head: ASEntmax's length scale"
    source = "Vasylenko et al., ICLR 2026, arXiv 2506.16640 (ASEntmax; deep-spin/asentmax)"

    def state(self, shape: Shape) -> ASScaleState:
        return ASScaleState(shape.d_model, shape.n_heads)

    def qkv(self, q: Tensor, k: Tensor, v: Tensor, state: ASScaleState, carry: dict | None,
            x: Tensor | None = None, pos: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        if x is None or pos is None:
            raise ValueError("asscale scales each query by a function of the layer's input and its position; "
                             "both are needed")
        scale = as_scale(x, pos, state, self.values["delta"])  # [b, H, n]
        return q * scale.unsqueeze(-1).to(q.dtype), k, v
