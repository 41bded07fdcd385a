"""Log-n attention scaling (Su 2021, "entropy-invariant attention"; the essay's entropy argument).

Attention entropy grows with the number of keys a query sees; multiplying the logits of a query by
log_L(n) keeps it roughly where training left it. lexkit's form, one definition for every scheme,
pattern and kernel:

    score(m, n) <- λ_m · score(m, n),    λ_m = max(1, ln(m + 1) / ln L),

m the query's position (0-based, so m + 1 keys are visible to it under causal attention), L the
training length. λ = 1 for every position seen in training (m + 1 <= L), so a model is unchanged
inside its training length and can switch log-n on at evaluation only (as Qwen-1 does); the
``max(1, .)`` is the form of the ReRoPE patches and Qwen-1 (scaling never *lowers* a logit).
The whole pre-softmax score is scaled (content and any bias): a per-query temperature 1/λ_m. For
schemes without a bias this is exactly q_m <- λ_m·q_m, which is how the dense and flex kernels
apply it; bias rows are scaled with it. It depends on the position, not on the pattern: under a
window the count of visible keys stops at W while λ keeps growing (state it when comparing).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def logn_scale(pos: Tensor, train_len: int) -> Tensor:
    """λ_m = max(1, ln(m + 1)/ln L) per query, pos: [n] integer -> float32 [n]."""
    if train_len < 2:
        raise ValueError(f"log-n scaling needs a training length >= 2, got {train_len}")
    m = pos.to(torch.float64)
    return (torch.log1p(m.clamp_min(0)) / math.log(train_len)).clamp_min(1.0).to(torch.float32)
