"""Data-dependent key and value shift (Lin et al. 2025, "Forgetting Transformer: Softmax Attention with
a Forget Gate", ICLR 2025, arXiv 2503.02130; the "Pro" block's ``use_k_shift`` / ``use_v_shift``,
zhixuan-lin/forgetting-transformer ``ShiftLinear``): each key and value becomes a mix of its own
and the previous position's, with a weight per head and position computed from the layer's
normalized input x::

    α_t,h = σ(x_t · w_h),    k'_t,h = (1 - α_t,h) k_t,h + α_t,h k_{t-1},h    (k_{-1} = 0)

and the same for v with its own weights. So a key can say "I follow X" (the copying circuit's
previous-token half) without a previous-token head. Applied to the projections before the
position transform, as the reference does (before its QK-norm and RoPE).

``kshift`` shifts keys and values (the Pro block); ``kshift:v=false`` keys only. State: the mixing
weights ``blocks.i.kshift.k.weight`` (and ``.v.weight``) [H, d], no bias (the reference's
``shift_proj``), drawn from N(0, 0.02²) (its ``initializer_range``), so α starts near 1/2. Through a
KV cache the last key and value of the piece before are carried, so a streamed sequence equals one
pass.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ...core.specs import Param
from .base import Modifier, Shape

#: the standard deviation of the mixing weights at initialization (the reference's initializer_range)
INIT_STD = 0.02


def mix_previous(t: Tensor, alpha: Tensor, previous: Tensor | None = None) -> Tensor:
    """(1 - α_t) t_t + α_t t_{t-1} per head: t [b, h, n, hd], alpha [b, n, h], ``previous``
    [b, h, 1, hd] the row before t (None: zeros) -> [b, h, n, hd]."""
    before = t.new_zeros(t.shape[0], t.shape[1], 1, t.shape[-1]) if previous is None else previous.to(t.dtype)
    shifted = torch.cat((before, t[..., :-1, :]), dim=-2)  # [b, h, n, hd]: t_{t-1}
    a = alpha.transpose(1, 2).unsqueeze(-1).to(t.dtype)  # [b, h, n, 1]
    return (1 - a) * t + a * shifted


class ShiftGates(nn.Module):
    """The mixing weights w_h of the keys (and values): ``k`` (``v``) maps x [.., d] to [.., H]."""

    def __init__(self, d_model: int, n_heads: int, values: bool) -> None:
        super().__init__()
        self.k = nn.Linear(d_model, n_heads, bias=False)
        self.v = nn.Linear(d_model, n_heads, bias=False) if values else None
        for linear in (self.k, self.v):
            if linear is not None:
                nn.init.normal_(linear.weight, std=INIT_STD)


class KShift(Modifier):
    """k (and v) mixed with the previous position's by a learned, data-dependent weight per head (FoX Pro)."""

    name = "kshift"
    params = {"v": Param(bool, True, "also shift the values (the Pro block shifts both)")}
    place = "qkv"
    summary = "k_t <- (1-α)k_t + α k_{t-1}, α = σ(x_t·w_h) per head (and v): FoX's key/value shift"
    source = "Lin et al. 2025, arXiv 2503.02130 (zhixuan-lin/forgetting-transformer, Pro block)"
    slot = "kshift"

    def state(self, shape: Shape) -> ShiftGates:
        return ShiftGates(shape.d_model, shape.n_heads, self.values["v"])

    def qkv(self, q: Tensor, k: Tensor, v: Tensor, state: ShiftGates, carry: dict | None,
            x: Tensor | None = None, pos: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        if x is None:
            raise ValueError("kshift mixes keys by weights computed from the layer's input x; none was given")
        k_out = self._shift(k, state.k, x, carry, "k")
        v_out = v if state.v is None else self._shift(v, state.v, x, carry, "v")
        return q, k_out, v_out

    def _shift(self, t: Tensor, linear: nn.Linear, x: Tensor, carry: dict | None, which: str) -> Tensor:
        logits = linear(x)  # [b, n, h]
        alpha = torch.sigmoid(logits if logits.dtype == torch.float64 else logits.float())  # at least float32
        key = (self.name, which)
        out = mix_previous(t, alpha, None if carry is None else carry.get(key))
        if carry is not None:
            carry[key] = t[..., -1:, :].detach()
        return out
