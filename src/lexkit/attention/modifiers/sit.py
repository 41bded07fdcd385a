"""Scale-invariant attention (Anson, Wang, Aitchison, NeurIPS 2025, "Scale-invariant attention",
arXiv 2505.17083): a transform of each score by the distance t = m - n between query and key, a
factor and an offset::

    L_mn = a_t·s_mn + b_t,    a_t² = 2·ln(t/τ + 1) + 1,    b_t = -2·ln(t/τ + 1) = 1 - a_t²

The paper asks two things of attention at every scale of distance (keys 1-10, 10-100, 100-1000
back): the total attention over [t, tΔ) stays Θ(1) (it neither vanishes far away nor swamps the
local keys) and its sparsity within the range stays bounded. For Gaussian logits s ~ N(0, 1) both
hold when E[exp(L_t)] = α / (t/τ + 1) and E[exp(L_t) L_t] = β / (t/τ + 1), solved by
a_t² = 2[ln(t/τ + 1) - ln α + β/α] and b_t = -a_t² + β/α; pinning the boundary a_0 = 1, b_0 = 0
(a key at distance 0 is left alone) gives α = β = e^(1/2) and the form above: one parameter, τ,
the range of distances left nearly unchanged (the paper's best: τ = 10, the default here).

The transform multiplies the whole score, a bias scheme's bias included (the paper pairs it with
p-RoPE, which has none). Both terms depend on the distance, not on the query alone, so it is an
elementwise function of the score and the positions (:meth:`Modifier.position_fn`): dense and
chunked run it in the block computation, flex in its ``score_mod``, and a KV cache exactly (a
distance is a difference of positions). Group ``temperature``, on a global layer (a window keeps
every distance below W). No reference code is published: the form is re-derived here from the
paper's two conditions and boundary pins (tests/test_layer_modifiers.py checks both conditions).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ...core.specs import Param, positive
from .temperature import Temperature


def sit_terms(t: Tensor, tau: float) -> tuple[Tensor, Tensor]:
    """(a_t, b_t) at distances t (any shape, clamped at 0), float32: a_t = √(2 ln(t/τ + 1) + 1),
    b_t = -2 ln(t/τ + 1)."""
    log_t = torch.log1p(t.clamp(min=0).to(torch.float32) / tau)
    return torch.sqrt(2.0 * log_t + 1.0), -2.0 * log_t


class ScaleInvariant(Temperature):
    """a_t·s + b_t by distance t (scale-invariant attention, Anson et al. 2025)."""

    name = "sit"
    params = {"tau": Param(float, 10.0, "τ, the distances left nearly unchanged (the paper's best: 10)",
                           positive, "> 0")}
    summary = "a_t·s + b_t by distance t: a² = 2ln(t/τ+1) + 1, b = 1 - a² (scale-invariant attention)"
    source = "Anson, Wang, Aitchison 2025, arXiv 2505.17083 (NeurIPS 2025)"

    def position_fn(self, state):
        tau = float(self.values["tau"])

        def transform(score: Tensor, m: Tensor, n: Tensor) -> Tensor:
            a, b = sit_terms(m - n, tau)  # broadcast to the score's [.., n_q, n_k]
            return score * a.to(score.dtype) + b.to(score.dtype)

        return transform
