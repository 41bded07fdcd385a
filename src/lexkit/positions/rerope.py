"""ReRoPE and leaky ReRoPE (Su 2023, "Rectified Rotary Position Embeddings", bojone/rerope).

A rotary scheme whose relative position is clamped (or leaks) past a window w; not one transform
of q and k, so it is computed through :meth:`Scheme.scores` (two score passes) and runs on the
dense and chunked kernels only. Registered after the ten schemes of the two source documents (see ``__init__``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..core.specs import Param, positive
from .base import Scheme, register
from .rotary import PARTIAL_PARAMS, rotary_angles, rotate_partial, rotated_dims


@register
class ReRoPE(Scheme):
    """ReRoPE and leaky ReRoPE (Su 2023, "Rectified Rotary Position Embeddings", bojone/rerope):
    RoPE whose relative position is min(m - n, w) (``k=inf``, the default), or, leaky, m - n below
    w and w + (m - n - w)/k beyond. Inside w it is RoPE exactly, so a model trained with ``rope``
    can be evaluated with it (``--scheme rerope:w=...``).

    Not one transform of q and k (the relative position is not linear in m - n), so it is computed
    as two score passes, as the reference code does: ordinary RoPE where m - n < w, and beyond it
    q rotated at position m/k + w(1 - 1/k) against k rotated at n/k (k = inf: q at w, k unrotated),
    whose angle difference is exactly w + (m - n - w)/k. It runs on the dense and chunked kernels
    (through :meth:`scores`); FlexAttention would need the two passes merged by log-sum-exp and
    refuses it.
    """

    name = "rerope"
    family = "rotary"
    separable = False
    params = {
        "w": Param(int, 512, "window w: relative positions past it are clamped (default: the training length; "
                   "512, the reference's, without one)", positive, "> 0"),
        "k": Param(float, math.inf, "leak: past w positions grow by 1/k (inf: ReRoPE, 16: the leaky reference)",
                   lambda x: x >= 1, ">= 1"),
        "base": Param(float, 10000.0, "θ_i = base^(-2i/h)", positive, "> 0"),
        **PARTIAL_PARAMS,
    }
    train_len_params = ("w",)
    summary = "RoPE with relative position min(m-n, w) (leaky: w + (m-n-w)/k past w)"

    def __init__(self, n_heads: int, head_dim: int, **values) -> None:
        super().__init__(n_heads, head_dim, **values)
        self.rot_dims, self.rot_heads = rotated_dims(f"scheme {self.name}", head_dim, n_heads, values)  # r, K

    def transform_qk(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, Tensor]:
        raise ValueError(f"{self.spec} is not one transform of q and k; use kernel 'dense' or 'chunked'")

    def scores(self, q, k, q_pos, k_pos, *, transformed=False, bias=None, visible=None, context=None) -> Tensor:
        """[b, h, n_q, n_k]: RoPE scores where m - n < w, the clamped (or leaky) ones beyond."""
        if transformed:
            raise ValueError(f"{self.spec}: scores need the raw q and k")
        q_pos = torch.as_tensor(q_pos, device=q.device)
        k_pos = torch.as_tensor(k_pos, device=k.device)
        h, base, r = self.head_dim, self.values["base"], self.rot_dims
        w, leak = self.values["w"], self.values["k"]

        def rot(x: Tensor, pos: Tensor) -> Tensor:
            cos, sin = rotary_angles(pos, r, base)
            return rotate_partial(x, cos.to(x.dtype), sin.to(x.dtype), r, self.rot_heads)

        near = rot(q, q_pos) @ rot(k, k_pos).transpose(-1, -2)
        if math.isinf(leak):
            far = rot(q, torch.full_like(q_pos, w, dtype=torch.float64)) @ k.transpose(-1, -2)
        else:
            far = rot(q, q_pos / leak + w * (1 - 1 / leak)) @ rot(k, k_pos / leak).transpose(-1, -2)
        inside = (q_pos[:, None] - k_pos[None, :]) < w  # [n_q, n_k]
        return torch.where(inside, near, far) / math.sqrt(h)
