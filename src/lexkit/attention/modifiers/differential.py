"""Differential attention (Ye et al., ICLR 2025, "Differential Transformer", arXiv 2410.05258; reference
microsoft/unilm ``Diff-Transformer/multihead_diffattn.py``): the difference of two softmax maps, so
that attention both share (noise, a sink) cancels:

    DiffAttn(X) = (softmax(Q1 K1ᵀ/√d) − λ·softmax(Q2 K2ᵀ/√d)) V
    λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init,    λ_init = 0.8 − 0.6·exp(−0.3·(l − 1))
    head_i = (1 − λ_init)·RMSNorm(DiffAttn_i(X))

with l the 1-based layer (the reference's ``lambda_init_fn(depth)`` takes the 0-based index:
0.8 − 0.6·exp(−0.3·depth), the same number). How the heads split, as in the reference: a layer
of H heads of dimension d is H/2 differential heads. Differential head i takes Q1, K1 from the
layer's head 2i and Q2, K2 from head 2i+1 (the reference's ``view(b, n, 2·heads, d)``), and V of
dimension 2d from the same two heads side by side (``view(b, n, heads, 2·d)``); its output fills
the channels of heads 2i and 2i+1 again, so the output projection sees the reference's layout.
The parameter count is the baseline's (the paper's choice: h = d_model / 2d). Each map is an
ordinary attention of one of the layer's heads: the position scheme, the pattern's mask, a
temperature, a soft cap or a sink act on it as on any head, on every kernel and through the KV cache.

The computation: :meth:`Differential.prepare` hands every head the value rows of its pair
([b, H, n, 2d]); the kernel mixes them with that head's softmax, so head 2i yields softmax_1·V and
head 2i+1 softmax_2·V; :meth:`Differential.finish` takes their difference with λ, normalizes
each differential head over its 2d channels (RMSNorm, ε = 1e-5, a learned gain of 2d shared by
the heads, as the reference's ``subln``) and scales by (1 − λ_init). Learned state (``blocks.i.diff``):
λq1, λk1, λq2, λk2 of dimension d, initialized N(0, 0.1²) as the reference, one λ per layer; the
gain starts at 1. ``diff:init=X`` fixes λ_init (the paper's ablation tries 0.8 and 0.5).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ...core.specs import Param
from .base import Modifier, Shape

#: the reference's RMSNorm epsilon (``subln``)
NORM_EPS = 1e-5


def lambda_init(layer: int) -> float:
    """λ_init = 0.8 − 0.6·exp(−0.3·l) at the 0-based layer index l (the paper's (l − 1), 1-based)."""
    return 0.8 - 0.6 * math.exp(-0.3 * layer)


def rms_norm(x: Tensor, gain: Tensor, eps: float = NORM_EPS) -> Tensor:
    """x·rsqrt(mean(x², last axis) + ε)·gain, computed in float32 (the reference's RMSNorm)."""
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * gain.to(x.dtype)


class DiffState(nn.Module):
    """One layer's λ vectors, its λ_init and the RMSNorm gain of its differential heads."""

    def __init__(self, head_dim: int, init: float) -> None:
        super().__init__()
        self.lambda_init = float(init)
        self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2 = (
            nn.Parameter(torch.randn(head_dim) * 0.1) for _ in range(4))
        self.gain = nn.Parameter(torch.ones(2 * head_dim))

    def lam(self) -> Tensor:
        """λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init, a float32 scalar."""
        one = torch.exp(torch.dot(self.lambda_q1.float(), self.lambda_k1.float()))
        two = torch.exp(torch.dot(self.lambda_q2.float(), self.lambda_k2.float()))
        return one - two + self.lambda_init


class Differential(Modifier):
    """Differential attention: the difference of two softmax maps per pair of heads (Ye et al. 2025)."""

    name = "diff"
    params = {"init": Param(float, None, "λ_init (default: 0.8 − 0.6·exp(−0.3·l) at the 0-based layer l)",
                            lambda x: 0 <= x < 1, "in [0, 1)")}
    place = "attention"
    group = "attention"
    summary = "(softmax(Q1K1ᵀ) − λ·softmax(Q2K2ᵀ))V per pair of heads, RMSNorm, ×(1 − λ_init)"
    source = "Ye et al., ICLR 2025, Differential Transformer (microsoft/unilm Diff-Transformer)"
    slot = "diff"

    def check(self, shape: Shape) -> None:
        if shape.n_heads % 2:
            raise ValueError(f"+diff pairs a layer's heads (Q1, K1 from head 2i, Q2, K2 from head 2i+1), which needs "
                             f"an even number of heads; this model has {shape.n_heads}")

    def state(self, shape: Shape) -> DiffState:
        init = self.values["init"]
        if init is None:
            if shape.layer is None:
                raise ValueError("+diff's λ_init depends on the layer's index; build it for one layer")
            init = lambda_init(shape.layer)
        return DiffState(shape.head_dim, init)

    def prepare(self, q: Tensor, k: Tensor, v: Tensor, state: DiffState) -> tuple[Tensor, Tensor, Tensor]:
        b, h, n, d = v.shape
        pairs = v.view(b, h // 2, 2, n, d).permute(0, 1, 3, 2, 4).reshape(b, h // 2, n, 2 * d)  # [b, H/2, n, 2d]
        return q, k, pairs.repeat_interleave(2, dim=1)  # [b, H, n, 2d]: heads 2i and 2i+1 mix pair i's values

    def finish(self, y: Tensor, x: Tensor, state: DiffState) -> Tensor:
        b, h, n, d2 = y.shape  # [b, H, n, 2d]: softmax_1·V on even heads, softmax_2·V on odd ones
        first, second = y.view(b, h // 2, 2, n, d2).unbind(2)  # unbind: its backward stacks, no zero-filled buffer
        diff = first - state.lam().to(y.dtype) * second  # [b, H/2, n, 2d]
        diff = rms_norm(diff, state.gain) * (1.0 - state.lambda_init)
        return diff.view(b, h // 2, n, 2, d2 // 2).permute(0, 1, 3, 2, 4).reshape(b, h, n, d2 // 2)  # [b, H, n, d]
