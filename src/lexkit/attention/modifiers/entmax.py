"""α-entmax attention (Peters, Niculae, Martins, ACL 2019, "Sparse Sequence-to-Sequence Models";
Correia, Niculae, Martins, EMNLP 2019, "Adaptively Sparse Transformers"; the ``entmax`` package,
deep-spin/entmax, the oracle of tests/test_entmax.py): each query's weights over its visible keys are

    A_ij = [(α − 1)·z_ij − τ_i]_+^(1/(α − 1)),    τ_i the one threshold with Σ_j A_ij = 1

which is the softmax as α → 1 and sparsemax at α = 2; for α > 1 a key whose score falls more than a
margin below the best gets *exactly* zero weight, however many keys there are, so a global head's mass
on the right key does not dilute with length the way a softmax's does (the ``python`` needles of
docs/hunt.md). ASEntmax (Vasylenko et al., ICLR 2026, arXiv 2506.16640) adds a learned length scale
on z; this is α-entmax itself, its neutral point.

Computed as the package's ``entmax_bisect`` is: τ_i by bisection between max_j (α − 1) z_ij − 1
(where the best key alone has weight 1) and max_j (α − 1) z_ij − (1/n_i)^(α − 1) (where every one of
the row's n_i visible keys has at most 1/n_i), :data:`ITERATIONS` halvings (past float32's
resolution), then the row normalized to sum 1. The gradient is the closed form (Peters et al. 2019,
Prop. 2), not the bisection unrolled: with s_j = A_ij^(2 − α) on the support and 0 off it,
∂L/∂z_ij = s_j·g_j − s_j·(Σ_k s_k g_k)/(Σ_k s_k).

Each query's threshold needs its whole row, so the dense kernel (as one block), the chunked kernel and
the KV cache run it (:meth:`Modifier.weights`); compiled FlexAttention, whose ``score_mod`` sees one
score at a time, cannot, and says so. It replaces the softmax (group ``attention``) and has no sink
column to join."""

from __future__ import annotations

from functools import partial

import torch
from torch import Tensor

from ...specs import Param
from .base import Modifier

#: bisection halvings of τ's bracket (width at most 1): 2^-50 is past float32's and float64's need
ITERATIONS = 50


def _bisect(x: Tensor, alpha: float, counts: Tensor) -> Tensor:
    """[(x − τ)]_+^(1/(α−1)) normalized, τ by bisection; x = (α − 1)·z [..., n] (-inf: not visible),
    counts [..., 1] the visible keys of each row."""
    power = 1.0 / (alpha - 1.0)
    top = x.amax(dim=-1, keepdim=True)
    low = top - 1.0  # Σ_j p_j >= 1 here: the best key alone has weight 1
    width = 1.0 - counts.to(x.dtype).reciprocal().pow(alpha - 1.0)  # high = top − (1/n)^(α−1): Σ p <= 1
    for _ in range(ITERATIONS):
        width = width / 2
        mid = low + width
        mass = (x - mid).clamp_min(0.0).pow(power).sum(dim=-1, keepdim=True)
        low = torch.where(mass >= 1.0, mid, low)  # the root lies above mid while the mass is still >= 1
    p = (x - low).clamp_min(0.0).pow(power)
    return p / p.sum(dim=-1, keepdim=True)


class _Entmax(torch.autograd.Function):
    """α-entmax over the last dim with the closed-form backward (module docstring); written with
    ``setup_context`` and a generated vmap rule, so seeds trained as one batched model run it."""

    generate_vmap_rule = True

    @staticmethod
    def forward(z: Tensor, alpha: float, counts: Tensor) -> Tensor:
        return _bisect(z * (alpha - 1.0), alpha, counts)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.alpha = inputs[1]
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (p,) = ctx.saved_tensors
        s = torch.where(p > 0, p.pow(2.0 - ctx.alpha), torch.zeros_like(p))  # [..., n]: 0 off the support
        dz = s * grad
        dz = dz - s * dz.sum(dim=-1, keepdim=True) / s.sum(dim=-1, keepdim=True)
        return dz, None, None


def entmax_weights(scores: Tensor, visible: Tensor, q_idx: Tensor, k_idx: Tensor, alpha: float = 1.5,
                   carry: dict | None = None) -> Tensor:
    """α-entmax of each query's row of visible scores: scores z [b, h, n_q, n_k] (-inf where not
    visible), visible [n_q, n_k] -> weights [b, h, n_q, n_k] in float32 (float64 scores: float64),
    exactly 0 off each row's support, each row summing to 1. ``q_idx``/``k_idx``/``carry`` unused
    (:meth:`Modifier.weights`)."""
    z = (scores if scores.dtype == torch.float64 else scores.float()).masked_fill(~visible, float("-inf"))
    counts = visible.sum(dim=-1, keepdim=True).clamp_min(1)  # [n_q, 1]
    return _Entmax.apply(z, float(alpha), counts)


def _above_one(value: float) -> bool:
    return 1.0 < value <= 16.0


class Entmax(Modifier):
    """α-entmax in place of the softmax: exact zeros below a threshold per query (Peters et al. 2019)."""

    name = "entmax"
    params = {"alpha": Param(float, 1.5, "α: 1 is the softmax, 2 sparsemax; larger is sparser", _above_one,
                             "in (1, 16]: 1 is the softmax, no modifier")}
    positional = "alpha"
    place = "attention"
    group = "attention"
    summary = "A_ij = [(α−1)z_ij − τ_i]_+^(1/(α−1)), τ_i so each row sums to 1: exact zeros below a margin"
    source = ("Peters, Niculae, Martins, ACL 2019; Correia et al., EMNLP 2019 (deep-spin/entmax entmax_bisect); "
              "ASEntmax's neutral point (Vasylenko et al., arXiv 2506.16640)")
    flex_refusal = ("kernel 'flex' cannot run entmax attention (each query's threshold needs its whole row); use "
                    "'dense' or 'chunked'")
    excludes = {"sink": "entmax replaces the softmax over keys, and a sink logit is a column of a softmax it does "
                        "not have"}

    def weights(self, state):
        return partial(entmax_weights, alpha=self.values["alpha"])
