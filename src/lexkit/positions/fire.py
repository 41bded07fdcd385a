"""FIRE: functional interpolation for relative positions (Li et al. 2023, "Functional
Interpolation for Relative Positions Improves Long Context Transformers", ICLR 2024, Sec. 3).

A learned bias of the distance, normalised by the *query's* position::

    b_h(i, j) = f_θ( ψ(i - j) / ψ(max(L, i)) )_h,      ψ(x) = log(c·x + 1),

f_θ an MLP 1 -> 32 -> H (ReLU), c (init 0.1) and the threshold L learned ("progressive
interpolation": queries up to L divide by ψ(L), later ones by their own ψ(i), so the MLP's input
stays in [0, 1] at any length). L = |ℓ|·L_0 with ℓ a learned multiplier (init 1) and L_0 the
training length. The normaliser is the maximum of L and i; a published copy takes the minimum by
mistake (tests/test_fire.py tells them apart).

Choices written down (the reference code's, each tested):

* c enters as |c| and L as |ℓ|·L_0 (learned values of either sign stay meaningful), and the
  denominator gets ε = 1e-6, so c -> 0 stays finite.
* The MLP's weights are initialised as ``nn.Linear``'s defaults (U(±1/sqrt(fan_in))); they are
  plain parameters, so the model's own N(0, 0.02) init of its linear layers leaves them alone.
  Its output layer has no bias: a constant per head adds the same value to every score of a
  query, which the softmax ignores (its gradient is 0, and Adam would walk it on rounding noise).
* i is the query's position and i - j the distance, both 0-based; keys after the query (masked)
  get distance 0.
* ``per_layer``: every layer has its own FIRE (the paper's default; its "FIRE-S" shares one).

The bias depends on the query's position, so it has no distance table: :meth:`bias_fn` is
evaluated per block on the dense and chunked kernels and the KV cache (the MLP as a matmul, in
slices of rows) and per score inside FlexAttention's ``score_mod`` (the 32 hidden units unrolled
into scalar operations), one formula either way.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..core.specs import Param, positive
from .base import Scheme, register

EPS = 1e-6  # added to ψ(max(L, i)), as the reference code does
SLICE = 1 << 14  # normalised distances per MLP matmul on the dense path (32 floats of hidden state each)


def fire_input(dist: Tensor, pos: Tensor, c: Tensor, threshold: Tensor) -> Tensor:
    """ψ(d) / (ψ(max(L, i)) + ε) with ψ(x) = log(c·x + 1), broadcast over ``dist`` and ``pos``
    (c, L: 0-d tensors, already |c| and |ℓ|·L_0)."""
    d, i = dist.to(c.dtype), pos.to(c.dtype)
    return torch.log1p(c * d) / (torch.log1p(c * torch.maximum(i, threshold)) + EPS)


@register
class FIRE(Scheme):
    """FIRE (Li et al. 2023): bias f_θ(ψ(m - n) / ψ(max(L, m))), ψ(x) = log(c·x + 1); f_θ an MLP
    1 -> ``width`` -> H, c and L learned."""

    name = "fire"
    family = "bias"
    relative = False  # past L the normaliser is the query's own position
    query_bias = True
    per_layer = True
    params = {
        "width": Param(int, 32, "hidden units of the MLP f", positive, "> 0"),
        "c": Param(float, 0.1, "initial c of ψ(x) = log(c·x + 1)", positive, "> 0"),
        "L": Param(int, 512, "initial threshold L_0 (default: the training length; 512 without one)", positive, "> 0"),
    }
    train_len_params = ("L",)
    summary = "learned MLP of log-distance over log(max(L, query position)), c and L learned"

    def __init__(self, n_heads: int, head_dim: int, **values) -> None:
        super().__init__(n_heads, head_dim, **values)
        width = values["width"]
        self.c = nn.Parameter(torch.tensor([values["c"]]))  # [1]: a 0-d capture fails in flex backward
        self.multiplier = nn.Parameter(torch.ones(1))  # ℓ: L = |ℓ|·L_0
        self.w1 = nn.Parameter(torch.empty(width).uniform_(-1.0, 1.0))  # Linear(1, width): fan_in 1
        self.b1 = nn.Parameter(torch.empty(width).uniform_(-1.0, 1.0))
        bound = 1.0 / math.sqrt(width)
        self.w2 = nn.Parameter(torch.empty(n_heads, width).uniform_(-bound, bound))  # Linear(width, H, bias=False)

    def effective(self) -> tuple[Tensor, Tensor]:
        """(c, L) as used in ψ: |c| and |ℓ|·L_0, [1] tensors carrying gradients (read as c[0] inside
        the bias function: a captured 0-d tensor gets no gradient from FlexAttention's backward)."""
        return self.c.abs(), self.multiplier.abs() * self.values["L"]

    def bias(self, head: Tensor, dist: Tensor, pos: Tensor) -> Tensor:
        return self.bias_fn(0)(head, dist, pos)

    def mlp(self, x: Tensor) -> Tensor:
        """f_θ(x): [...] -> [..., H], hidden units by inputs ([width, SLICE] per matmul: a slice
        stays in cache, and the hidden layer of a 2,048^2 dense mask never exists at once)."""
        w1, b1 = self.w1.to(x.dtype)[:, None], self.b1.to(x.dtype)[:, None]
        parts = [self.w2.to(x.dtype) @ torch.relu(torch.addmm(b1, w1, part[None, :]))
                 for part in x.reshape(-1).split(SLICE)]  # [H, slice] each
        return torch.cat(parts, dim=1).T.reshape(*x.shape, self.n_heads)

    def bias_fn(self, n: int, device=None):
        c, threshold = self.effective()
        w1, b1, w2, width, mlp = self.w1, self.b1, self.w2, self.values["width"], self.mlp

        def fire(head: Tensor, dist: Tensor, pos: Tensor) -> Tensor:
            x = fire_input(dist, pos, c[0], threshold[0])
            if head.dim() == 0:  # a FlexAttention score_mod: one score, the hidden units unrolled
                out = w2[head, 0] * torch.relu(x * w1[0] + b1[0])
                for unit in range(1, width):
                    out = out + w2[head, unit] * torch.relu(x * w1[unit] + b1[unit])
                return out
            shape = torch.broadcast_shapes(head.shape, x.shape)
            values = mlp(x).expand(*shape, w2.shape[0])  # [..., H], one MLP per (distance, query)
            return values.gather(-1, head.expand(shape)[..., None]).squeeze(-1)

        return fire
