"""Rotary schemes: ``rope`` and ``xpos`` (one rotation, one decay; xPos with no decay is RoPE).

RoPE (Su et al. 2021, Eq. 34): rotate each 2-D pair i of q and k by angle p·θ_i,
θ_i = base^(-2i/h). Pairs are laid out "rotate-half" (dims i and i + h/2, as HF/Llama); the
paper's code pairs (2i, 2i+1). Scores are equal up to a fixed permutation of head dims, which the
learned projections absorb.

xPos (Sun et al. 2022, Eq. 9 and torchscale): also scale pair i of the query at m by
ζ_i^(m/B) and of the key at n by ζ_i^(-n/B), so the score carries ζ_i^((m-n)/B),
ζ_i = (2i + γh) / ((1 + γ)h), γ = 0.4, B = 512.

Numerics (both written down and tested):

* Angles are computed in float64 and cast after cos/sin, so float32 scores at positions ~65k
  match a float64 evaluation (a float32 angle table loses ~3 digits there).
* Partial RoPE (every rotary scheme, ReRoPE too): ``fraction=f`` rotates the first
  r = 2·floor(f·h/2) dimensions of each head (GPT-NeoX's ``rotary_pct`` 0.25, x-transformers'
  default half), with frequencies base^(-2i/r) over those r (as both do; the scalings and xPos's
  ζ are taken over r too), and leaves the other h - r as they are; ``heads=K`` rotates the last K
  heads only (x-transformers' ``rotate_num_heads``), the others get no position at all. An odd h
  rotates only with a fraction (``fraction=1``: h - 1), since r counts whole pairs.
* The decay only matters through m - n. We centre at c = the last query position of the call:
  the query gets ζ^((m - c)/B) >= 1, bounded by the span of the queries, and the key gets
  ζ^((c - min(n, c))/B) <= 1, which can only underflow to 0 (as the true product does), never
  overflow, at any length. Keys after the last query (masked by every causal pattern) get the
  factor of a key at c. ``max_query_span`` bounds the query span one call may cover so the query
  factor stays below e^30; :meth:`Scheme.scores` and the kernels split longer inputs.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..core.specs import Param, positive
from . import scaling
from .base import Scheme, register

#: the context-extension parameters shared by rope and xpos (positions/scaling.py)
SCALING_PARAMS = {
    "scaling": Param(str, "none", "RoPE scaling: " + ", ".join(scaling.METHODS), lambda x: x in scaling.SCALINGS,
                     "one of " + ", ".join(scaling.METHODS)),
    "factor": Param(float, None, "scale factor s (needed by every scaling)", lambda x: x >= 1, ">= 1"),
    "original_len": Param(int, None, "original length L (default: the training length)", positive, "> 0"),
    "beta_fast": Param(float, None, "yarn β_fast (default 32)", positive, "> 0"),
    "beta_slow": Param(float, None, "yarn β_slow (default 1)", positive, "> 0"),
    "attention_factor": Param(float, None, "yarn attention factor a, given (default: from s, mscale, "
                              "mscale_all_dim)", positive, "> 0"),
    "mscale": Param(float, None, "yarn mscale: a = m(s, mscale)/m(s, mscale_all_dim) when both are given "
                    "(DeepSeek)", lambda x: x >= 0, ">= 0"),
    "mscale_all_dim": Param(float, None, "yarn mscale_all_dim (with mscale)", lambda x: x >= 0, ">= 0"),
    "truncate": Param(bool, None, "yarn: round the ramp's ends to whole dims (default true; gpt-oss false)"),
    "low_freq": Param(float, None, "llama3 low_freq_factor (default 1)", positive, "> 0"),
    "high_freq": Param(float, None, "llama3 high_freq_factor (default 4)", positive, "> 0"),
}
#: partial RoPE, shared by every rotary scheme (rope, xpos, rerope)
PARTIAL_PARAMS = {
    "fraction": Param(float, None, "fraction of each head's dimensions rotated (default: all; GPT-NeoX 0.25)",
                      lambda x: 0 < x <= 1, "in (0, 1]"),
    "heads": Param(int, None, "rotate the last K heads only (default: all)", positive, "> 0"),
}


def rotated_dims(owner: str, head_dim: int, n_heads: int, values: dict) -> tuple[int, int | None]:
    """(r, K): the dimensions rotated in each head, 2·floor(fraction·h/2) (h without a fraction),
    and the number of heads rotated (None: all); ValueError when r is 0 or odd (an odd h rotated
    whole) or K exceeds the heads. An odd h rotates with a fraction: its pairs are whole."""
    fraction = values.get("fraction")
    dims = head_dim if fraction is None else 2 * int(fraction * head_dim / 2)
    if dims % 2:
        raise ValueError(f"{owner}: a head of {head_dim} dimensions cannot be rotated whole (rotations turn pairs); "
                         f"give fraction=F to rotate 2·floor(F·{head_dim}/2) of them (fraction=1: {head_dim - 1})")
    if dims == 0:
        raise ValueError(f"{owner}: fraction={values['fraction']} rotates no pair of a head of {head_dim} "
                         f"dimensions (the smallest is {2 / head_dim:g})")
    heads = values.get("heads")
    if heads is not None and heads > n_heads:
        raise ValueError(f"{owner}: heads={heads} exceeds the model's {n_heads} heads")
    return dims, (None if heads is None or heads == n_heads else heads)


def rotate_partial(x: Tensor, cos: Tensor, sin: Tensor, dims: int, heads: int | None) -> Tensor:
    """Partial RoPE: the first ``dims`` dimensions of each of the last ``heads`` heads (None: all)
    of x [..., H, n, h] rotated by cos, sin [n, dims/2] (:func:`rotate_half`), the rest unchanged."""
    if heads is not None:
        keep = x.shape[-3] - heads
        return torch.cat((x[..., :keep, :, :], rotate_partial(x[..., keep:, :, :], cos, sin, dims, None)), dim=-3)
    if dims < x.shape[-1]:
        return torch.cat((rotate_half(x[..., :dims], cos, sin), x[..., dims:]), dim=-1)
    return rotate_half(x, cos, sin)


def rotary_angles(pos: Tensor, head_dim: int, base: float, theta: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """cos and sin of p·θ_i in float64, pos: [n] (integer or fractional) -> two [n, head_dim/2]
    float64 tensors. ``theta`` [h/2] overrides base^(-2i/h) (a scaled RoPE's frequencies)."""
    if theta is None:
        theta = scaling.base_inv_freq(head_dim, base)
    angle = pos.to(torch.float64)[:, None] * theta.to(pos.device)  # [n, h/2]
    return torch.cos(angle), torch.sin(angle)


def rotate_half(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate pairs (i, i + h/2) of x: [..., n, h] by the angles of cos, sin: [n, h/2]."""
    # chunk, not slices: its backward concatenates the two gradients instead of zero-filling x's shape twice
    x1, x2 = x.chunk(2, dim=-1)  # [..., n, h/2] each
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def xpos_zeta(head_dim: int, gamma: float) -> Tensor:
    """ζ_i = (2i + γh) / ((1 + γ)h), i = 0 .. h/2 - 1, float64 [h/2] (torchscale's XPOS)."""
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (2 * i + gamma * head_dim) / ((1 + gamma) * head_dim)


class Rotary(Scheme):
    """Shared implementation of RoPE and xPos: rotation by p·θ_i, optional decay ζ_i^(Δ/B)."""

    family = "rotary"

    def __init__(self, n_heads: int, head_dim: int, **values) -> None:
        super().__init__(n_heads, head_dim, **values)
        self.rotate = values.get("rotate", True)
        self.decay = values.get("decay", False)
        self.rot_dims, self.rot_heads = rotated_dims(f"scheme {self.name}", head_dim, n_heads, values)  # r, K
        if "scaling" in values:
            if values["scaling"] == "none":  # unscaled: the training length fill means nothing
                self.values["original_len"] = None
            scaling.check(f"scheme {self.name}", self.values)
            if values["scaling"] == "dynamic" and self.decay:
                raise ValueError(f"{self.name}: scaling=dynamic depends on the length of each call, which "
                                 f"xPos splits; use another scaling or xpos:decay=false")
        self._freq: tuple | None = None  # (length, θ', a) of the last call (dynamic: per length)
        if self.decay:
            zeta = xpos_zeta(self.rot_dims, values["gamma"])  # [r/2] float64
            self.register_buffer("log_zeta", torch.log(zeta), persistent=False)
            # keep every query factor ζ_min^(-span/B) below e^30
            self.max_query_span = max(1, int(30 * values["scale_base"] / -math.log(float(zeta.min()))))
        self._cache: tuple | None = None  # (q_pos, k_pos, dtype, factors): reused across layers

    @classmethod
    def fills(cls, given, values):
        """``original_len`` takes the training length only under a scaling (unscaled, it means nothing)."""
        unscaled = values.get("scaling", "none") == "none"
        return tuple(k for k in super().fills(given, values) if k != "original_len" or not unscaled)

    def _decay(self, pos: Tensor, centre: Tensor, sign: float) -> Tensor:
        """ζ_i^(sign·(pos - c)/B) as [n, h/2] float64."""
        expo = sign * (pos.to(torch.float64) - centre)[:, None] / self.values["scale_base"]
        return torch.exp(expo * self.log_zeta.to(pos.device))

    def _factors(self, q_pos: Tensor, k_pos: Tensor, dtype: torch.dtype) -> tuple[Tensor, ...]:
        """(cos_q, sin_q, cos_k, sin_k), each [n, h/2] in ``dtype``: the rotation with the decay
        folded in (both halves of pair i share ζ_i, so scaling after rotating is scaling cos and
        sin). Computed in float64 and cast once; cached for the positions of one forward pass,
        which every layer shares."""
        cached = self._cache
        if cached is not None and cached[0] is q_pos and cached[1] is k_pos and cached[2] == dtype:
            return cached[3]
        half = self.rot_dims // 2
        if self.rotate:
            theta, a = self.frequencies(q_pos, k_pos)
            cos_q, sin_q = rotary_angles(q_pos, self.rot_dims, 0.0, theta)
            cos_k, sin_k = (cos_q, sin_q) if k_pos is q_pos else rotary_angles(k_pos, self.rot_dims, 0.0, theta)
            if a != 1.0:  # HF: the attention factor multiplies cos and sin, so logits scale by a²
                cos_q, sin_q, cos_k, sin_k = cos_q * a, sin_q * a, cos_k * a, sin_k * a
        else:
            cos_q = torch.ones(q_pos.shape[0], half, dtype=torch.float64, device=q_pos.device)
            cos_k = torch.ones(k_pos.shape[0], half, dtype=torch.float64, device=k_pos.device)
            sin_q, sin_k = torch.zeros_like(cos_q), torch.zeros_like(cos_k)
        if self.decay:
            last = q_pos.max()
            centre = last.to(torch.float64)
            d_q = self._decay(q_pos, centre, 1.0)  # ζ^((m-c)/B) >= 1
            d_k = self._decay(torch.minimum(k_pos, last), centre, -1.0)  # ζ^((c-n)/B) <= 1
            cos_q, sin_q, cos_k, sin_k = cos_q * d_q, sin_q * d_q, cos_k * d_k, sin_k * d_k
        factors = tuple(t.to(dtype) for t in (cos_q, sin_q, cos_k, sin_k))
        self._cache = (q_pos, k_pos, dtype, factors)
        return factors

    def frequencies(self, q_pos: Tensor | None = None, k_pos: Tensor | None = None) -> tuple[Tensor, float]:
        """(θ'_i float64 [r/2], attention factor a) under the scheme's scaling, over the r rotated
        dimensions; ``dynamic`` reads the current length max(position) + 1 of the call."""
        length = 0
        if self.values.get("scaling") == "dynamic" and q_pos is not None and q_pos.numel():
            length = int(max(q_pos.max(), k_pos.max())) + 1
        if self._freq is None or self._freq[0] != length:
            self._freq = (length, *scaling.inv_freq(self.rot_dims, self.values["base"], self.values, length))
        return self._freq[1], self._freq[2]

    def transform_qk(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, Tensor]:
        cos_q, sin_q, cos_k, sin_k = self._factors(q_pos, k_pos, q.dtype)
        r, heads = self.rot_dims, self.rot_heads
        return rotate_partial(q, cos_q, sin_q, r, heads), rotate_partial(k, cos_k, sin_k, r, heads)  # [..., n, h]


@register
class RoPE(Rotary):
    """Rotary position embedding (Su et al. 2021, RoFormer, Eq. 34)."""

    name = "rope"
    params = {"base": Param(float, 10000.0, "θ_i = base^(-2i/h)", positive, "> 0"), **SCALING_PARAMS, **PARTIAL_PARAMS}
    train_len_params = ("original_len",)
    summary = "rotate each pair of q and k by p·θ_i (scaling=linear|ntk|dynamic|yarn|llama3 stretches it)"


@register
class XPos(Rotary):
    """xPos (Sun et al. 2022, Eq. 9; γ from torchscale): RoPE times ζ_i^((m-n)/B).
    ``decay=false`` is RoPE exactly; ``rotate=false`` is Table 4's "xPos without rotation"."""

    name = "xpos"
    params = {
        "base": Param(float, 10000.0, "θ_i = base^(-2i/h)", positive, "> 0"),
        "gamma": Param(float, 0.4, "ζ_i = (2i + γh)/((1+γ)h)", positive, "> 0"),
        "scale_base": Param(float, 512.0, "B in ζ^((m-n)/B)", positive, "> 0"),
        "decay": Param(bool, True, "apply the ζ decay (false: RoPE)"),
        "rotate": Param(bool, True, "apply the rotation (false: decay only, Table 4)"),
        **SCALING_PARAMS,
        **PARTIAL_PARAMS,
    }
    train_len_params = ("original_len",)
    summary = "RoPE with per-dimension decay ζ_i^((m-n)/B) (the paper's scheme)"

