"""Adaptive temperature (Veličković, Perivolaropoulos, Barbero, Pascanu 2024, "softmax is not enough
(for sharp out-of-distribution)", arXiv 2410.01104): at inference, each query's scores are sharpened
by an inverse temperature chosen from the entropy of its own attention::

    H_m = -Σ_n p_mn ln(p_mn + 1e-9),    p = softmax(s_m)
    β_m = max(1, P(H_m)) if H_m > 0.5 else 1,    P(H) = -0.037 H⁴ + 0.481 H³ - 2.3 H² + 4.917 H - 1.791
    s'_m = β_m · s_m

P is the paper's polynomial fit of the temperature that restores a sharp distribution against the
entropy (its Figure 5 and its code, ``adaptive_temperature_softmax``, transcribed here with the same
1e-9 guard); β never raises the entropy (β >= 1) and leaves rows that are already sharp (H <= 0.5)
alone. With a sink logit on the layer its column is part of the distribution whose entropy is taken
and, as for every temperature, is not scaled.

Inference only, as the paper proposes it: a forward that trains runs the plain softmax (β = 1), so
the modifier changes nothing a run learns; an evaluation, the KV cache and generation apply it. It
needs each query's whole row of scores (:meth:`Modifier.row_fn`): the dense kernel (as one block),
the chunked kernel and the KV cache run it; compiled FlexAttention cannot, and says so. Group
``temperature``, on a global layer; not beside ``stickbreak``, which replaces the softmax.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .temperature import Temperature

#: P's coefficients, highest power first (numpy's polyval order, as the paper's code has them)
POLY_FIT = (-0.037, 0.481, -2.3, 4.917, -1.791)
#: below this entropy a row is left alone ("don't overcorrect low-entropy heads")
MIN_ENTROPY = 0.5


def adaptive_beta(entropy: Tensor) -> Tensor:
    """β = max(1, P(H)) where H > 0.5, else 1 (elementwise, P by Horner's rule)."""
    poly = torch.zeros_like(entropy)
    for coefficient in POLY_FIT:
        poly = poly * entropy + coefficient
    return torch.where(entropy > MIN_ENTROPY, poly.clamp_min(1.0), torch.ones_like(entropy))


def adaptive_rows(scores: Tensor, sink: Tensor | None = None) -> Tensor:
    """scores [..., n_q, n_k] (invisible keys -inf) times each row's β, from the entropy of its
    softmax (with ``sink`` [..., n_q, 1], the sink's column, in the distribution; not scaled)."""
    exact = scores if scores.dtype == torch.float64 else scores.float()  # at least float32
    logits = exact if sink is None else torch.cat((exact, sink.to(exact.dtype)), dim=-1)
    probs = torch.softmax(logits, dim=-1)
    entropy = -(probs * torch.log(probs + 1e-9)).sum(dim=-1, keepdim=True)  # [..., n_q, 1]
    return scores * adaptive_beta(entropy).to(scores.dtype)


class Adaptive(Temperature):
    """β from each query's attention entropy, at inference (softmax is not enough, Veličković et al.)."""

    name = "adaptive"
    summary = "β = max(1, P(H)) from each row's entropy H (H > 0.5), at inference only"
    source = "Veličković et al. 2024, arXiv 2410.01104 (softmax is not enough)"
    flex_refusal = ("kernel 'flex' cannot run the adaptive temperature (it needs each query's whole row of "
                    "scores); use 'dense' or 'chunked'")
    excludes = {"stickbreak": "the adaptive temperature is read from a softmax's entropy, and stick-breaking "
                              "replaces the softmax"}

    def row_fn(self, state, training: bool):
        return None if training else adaptive_rows
