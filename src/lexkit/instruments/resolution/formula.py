"""The two numbers of attention resolution: R (*A Length-Extrapolatable Transformer*, Sec. 2.2, Eq. 11),
how well attention tells near from far, and the attention entropy of a query.

For a curve s over token distances 0 .. N-1 (the expected pre-softmax score at each distance)

    R(s) = sum_i e^{s[i]} (e^{s[i]} - e^{s[i+1]}) / (sum_i e^{s[i]})^2,

with e^{s[N]} = 0 past the end and e^{-inf} = 0 for a distance never visible; computed stably
(shifted by the max). 0 <= R <= 1 for every curve (proof in ``docs/resolution.md``). The curve is the
analytic s[n] of a scheme (:mod:`.curves`) or the measured s_hat[n] of a model (:mod:`.empirical`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def resolution(s: Tensor | Sequence[float]) -> Tensor:
    """R(s) over the last dimension: ``[..., N] -> [...]`` (float64).

    ``-inf`` entries (never-visible distances) contribute e^{-inf} = 0; e^{s[N]} = 0 past the end.
    A curve with no finite entry gives NaN.
    """
    s = torch.as_tensor(s).to(torch.float64)
    if s.ndim == 0 or s.shape[-1] == 0:
        raise ValueError("resolution needs a curve with at least one distance")
    top = s.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)  # [..., N], in [0, 1], -inf -> 0
    nxt = torch.cat((e[..., 1:], torch.zeros_like(e[..., :1])), dim=-1)  # e^{s[i+1]}, 0 past the end
    return (e * (e - nxt)).sum(-1) / e.sum(-1).square()


def entropy(probs: Tensor) -> Tensor:
    """The attention entropy of each query, in nats: -sum_k p_k ln p_k over the last dimension
    (keys), 0 ln 0 = 0: ``[..., n_k] -> [...]``. ln(n) for uniform attention over n keys."""
    return -torch.special.xlogy(probs, probs).sum(-1)
