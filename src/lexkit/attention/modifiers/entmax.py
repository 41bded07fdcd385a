"""α-entmax attention (Peters, Niculae, Martins, ACL 2019, "Sparse Sequence-to-Sequence Models";
Correia, Niculae, Martins, EMNLP 2019, "Adaptively Sparse Transformers"; the ``entmax`` package,
deep-spin/entmax, the oracle of tests/test_entmax.py): each query's weights over its visible keys are

    A_ij = [(α − 1)·z_ij − τ_i]_+^(1/(α − 1)),    τ_i the one threshold with Σ_j A_ij = 1

which is the softmax as α → 1 and sparsemax at α = 2; for α > 1 a key whose score falls more than a
margin below the best gets *exactly* zero weight, however many keys there are, so a global head's mass
on the right key does not dilute with length the way a softmax's does (the ``python`` needles of
docs/hunt.md). ASEntmax (Vasylenko et al., ICLR 2026, arXiv 2506.16640) adds a learned length scale
on z; this is α-entmax itself, its neutral point.

At α = 1.5 and α = 2 τ_i has a closed form over the sorted row (Peters et al. 2019, Alg. 2, the package's
exact ``entmax15``; sparsemax's, Martins & Astudillo 2016): with y the row shifted so its best is 0 and
sorted descending, the k-th candidate is τ_k = mean_k − sqrt((1 − k·var_k)/k) (α = 1.5: mean and variance of
y_(1..k)) or τ_k = (Σ_{j<=k} y_(j) − 1)/k (α = 2), and τ_i = τ_{k*} for the largest k* with τ_k <= y_(k);
one sort of the row instead of 50 passes over it (3.8x faster at 1,024 keys, the hunt's 16x rows). Any
other α is computed as the package's ``entmax_bisect`` is: τ_i by bisection between max_j (α − 1) z_ij − 1
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

from ...core.specs import Param
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


#: the α whose threshold has a closed form over the sorted row (:func:`_sorted`)
EXACT = (1.5, 2.0)


def _sorted(x: Tensor, alpha: float) -> Tensor:
    """[(x − τ)]_+^(1/(α−1)) normalized with τ in closed form over the sorted row (module docstring), α in
    :data:`EXACT`; x = (α − 1)·z [..., n] (-inf: not visible). A key not visible is set 2 below the row's
    best, under any threshold (τ >= best − 1: the best key alone would have weight 1), so it never enters the
    support and τ is the visible keys' own."""
    top = x.amax(dim=-1, keepdim=True)
    y = (x - top).masked_fill(torch.isinf(x), -2.0)  # [..., n]: the best 0, not visible -2
    ys = torch.sort(y, dim=-1, descending=True).values
    k = torch.arange(1, y.shape[-1] + 1, dtype=y.dtype, device=y.device)
    total = ys.cumsum(dim=-1)
    if alpha == 2.0:  # sparsemax
        tau = (total - 1.0) / k
    else:  # 1.5: Σ_{j<=k} (y_(j) − τ)² = 1 solved for the smaller root
        mean = total / k
        var = (ys * ys).cumsum(dim=-1) / k - mean * mean
        tau = mean - ((1.0 - k * var) / k).clamp_min(0.0).sqrt()
    support = (tau <= ys).sum(dim=-1, keepdim=True)  # [..., 1]: k*, at least 1
    p = (y - tau.gather(-1, support - 1)).clamp_min(0.0)
    if alpha != 2.0:
        p = p * p
    return p / p.sum(dim=-1, keepdim=True)


class _Entmax(torch.autograd.Function):
    """α-entmax over the last dim with the closed-form backward (module docstring); written with
    ``setup_context`` and a generated vmap rule, so seeds trained as one batched model run it."""

    generate_vmap_rule = True

    @staticmethod
    def forward(z: Tensor, alpha: float, counts: Tensor) -> Tensor:
        if alpha in EXACT:
            return _sorted(z * (alpha - 1.0), alpha)
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
