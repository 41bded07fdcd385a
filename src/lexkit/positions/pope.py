"""PoPE: polar coordinate position embedding (Gopalakrishnan et al. 2025, "Decoupling the 'What'
and 'Where' With Polar Coordinate Positional Embeddings", arXiv:2509.10534; x-transformers
``PolarEmbedding`` / ``apply_polar_pos_emb``, its ``polar_pos_emb=True``).

RoPE rotates pairs of q and k, so a pair's content sets both a magnitude and a phase that mixes
with position. PoPE keeps content in magnitudes and position in angles: each of the h dimensions
c of a head becomes one complex number, magnitude softplus(x_c) and angle p·θ_c (keys: p·θ_c + δ_hc),
θ_c = base^(-c/h), c = 0 .. h-1 (one frequency per dimension, not per pair), so

    score(m, n) = Σ_c softplus(q_c) softplus(k_c) cos((m - n)·θ_c - δ_hc) / sqrt(h),

δ a learned phase bias per head and dimension, clamped to [-2π, 0] wherever it is used.

As real vectors the transform maps q, k [..., h] to [..., 2h] (cos parts, then sin parts, as
x-transformers lays them out); the softmax scale stays 1/sqrt(h) (the kernels pass it, since SDPA's
default would read the doubled width). Choices written down, each tested:

* Angles p·θ_c in float64, cast after cos/sin (as RoPE here); δ enters through the angle sum
  cos(a + δ) = cos a cos δ - sin a sin δ, so gradients reach δ while the large angle stays exact.
  x-transformers adds δ to a float32 angle: the two agree where float32 angles are exact.
* softplus is computed in float32 and the result cast back to q's dtype (x-transformers).
* δ starts at 0 (x-transformers' default, ``phase=zero``) or uniform in [-2π, 0] (``phase=uniform``).
* One PoPE shared by every layer, as x-transformers builds one ``PolarEmbedding`` per model.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.specs import Param, positive
from .base import Scheme, register

PHASES = ("zero", "uniform")


def pope_frequencies(head_dim: int, base: float) -> Tensor:
    """θ_c = base^(-c/h), c = 0 .. h-1, float64 [h] (x-transformers' ``inv_freq`` of PolarEmbedding)."""
    return base ** (-torch.arange(head_dim, dtype=torch.float64) / head_dim)


def work_dtype(x: Tensor) -> torch.dtype:
    """float64 for float64 input, else float32 (half precision is computed in float32)."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def polar(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """[softplus(x)·cos, softplus(x)·sin]: x [..., n, h], cos/sin broadcastable to it -> [..., n, 2h]
    in x's dtype (computed in cos's, float32 for half-precision input)."""
    mag = F.softplus(x.to(cos.dtype))
    return torch.cat((mag * cos, mag * sin), dim=-1).to(x.dtype)


@register
class PoPE(Scheme):
    """PoPE (polar coordinate positions, 2025): magnitudes softplus(q), softplus(k) carry content,
    angles p·θ_c (keys + a learned phase δ_hc in [-2π, 0]) carry position; θ_c = base^(-c/h)."""

    name = "pope"
    family = "rotary"
    params = {
        "base": Param(float, 10000.0, "θ_c = base^(-c/h)", positive, "> 0"),
        "phase": Param(str, "zero", "initial phase bias δ: zero, or uniform in [-2π, 0]", lambda x: x in PHASES,
                       "one of " + ", ".join(PHASES)),
    }
    summary = "softplus magnitudes carry content, angles p·θ_c (+ learned phase δ) carry position"

    def __init__(self, n_heads: int, head_dim: int, **values) -> None:
        super().__init__(n_heads, head_dim, **values)
        phase = torch.zeros(n_heads, head_dim)
        if values["phase"] == "uniform":
            phase.uniform_(-2.0 * math.pi, 0.0)
        self.phase = nn.Parameter(phase)  # δ [H, h]
        self._cache: tuple | None = None  # (q_pos, k_pos, dtype, factors): one forward's, every layer's

    def _angles(self, q_pos: Tensor, k_pos: Tensor, dtype: torch.dtype) -> tuple[Tensor, ...]:
        """(cos, sin) of p·θ computed in float64 and cast to ``dtype``, for the query and the key
        positions: four [n, h]."""
        cached = self._cache
        if cached is not None and cached[0] is q_pos and cached[1] is k_pos and cached[2] == dtype:
            return cached[3]
        theta = pope_frequencies(self.head_dim, self.values["base"]).to(q_pos.device)
        out = []
        for pos in (q_pos, k_pos):
            angle = pos.to(torch.float64)[:, None] * theta  # [n, h]
            out += [torch.cos(angle).to(dtype), torch.sin(angle).to(dtype)]
        self._cache = (q_pos, k_pos, dtype, tuple(out))
        return self._cache[3]

    def transform_qk(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, Tensor]:
        dtype = work_dtype(q)
        cos_q, sin_q, cos_k, sin_k = self._angles(q_pos, k_pos, dtype)  # [n, h] each
        delta = self.phase.to(dtype).clamp(-2.0 * math.pi, 0.0)[:, None, :]  # [H, 1, h]
        cos_d, sin_d = torch.cos(delta), torch.sin(delta)
        cos_kd = cos_k * cos_d - sin_k * sin_d  # cos(n·θ + δ): [H, n_k, h]
        sin_kd = sin_k * cos_d + cos_k * sin_d
        return polar(q, cos_q, sin_q), polar(k, cos_kd, sin_kd)  # [..., n, 2h] each
