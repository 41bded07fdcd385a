"""CoPE: contextual position encoding (Golovneva et al. 2024, "Contextual Position Encoding:
Learning to Count What's Important", arXiv:2405.18719, Sec. 3 and Appendix B; x-transformers
``CoPE`` / ``attn_use_cope``). Causal only.

Positions count what the model selects instead of tokens. For a query i and a key j <= i::

    g_it = σ(q_i·k_t / sqrt(h)),      p_ij = min(Σ_{t=j..i} g_it, P - 1),
    score(i, j) = q_i·k_j / sqrt(h) + z_i(p_ij),   z_i(p) = q_i·e[p] at integers p,

with e [P, h] learned position embeddings (P = ``max_pos``), and z_i at a fractional p
interpolated between floor(p) and ceil(p): z_i(p) = (p - floor p)·z_i[ceil p] +
(1 - p + floor p)·z_i[floor p] (computing q·e once per integer, then interpolating scalars, as
the paper's code does).

Choices written down (the paper's code and x-transformers agree; each tested):

* The gates read the *scaled* logits q·k/sqrt(h) (the paper's Eq. 3 prints σ(q·k); its code and
  x-transformers gate the scaled ones); z_i = q_i·e[p] is not scaled.
* Only keys the query can see count: the gate of a masked key is 0 (the reference adds log of
  the mask before the gates). Under ``causal``, ``window`` and ``bca`` the visible keys of a query
  are one run of indices ending at itself, so the count is exactly t = j .. i; under ``sinks`` the
  keys between the sinks and the window do not count.
* e starts at zero (both references), so an untrained CoPE scores as NoPE; one e per layer shared
  by the heads (x-transformers builds one CoPE per attention layer): ``per_layer``.

Its scores are not one transform of q and k plus a bias (the positions depend on every q·k between
key and query), so it runs through :meth:`scores` on the dense and chunked kernels and the KV
cache (whose blocks hold every key a query sees, so the counts are exact); FlexAttention refuses it.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..core.specs import Param
from .base import Scheme, register


@register
class CoPE(Scheme):
    """CoPE (Golovneva et al. 2024): the score gains q_i·e[p_ij], p_ij = Σ_{t=j..i} σ(q_i·k_t/√h)
    clamped to max_pos - 1, e interpolated between integer positions."""

    name = "cope"
    family = "contextual"
    separable = False
    scores_only = "its positions count the gates σ(q·k) of every key between key and query"
    per_layer = True
    params = {
        "max_pos": Param(int, 16, "P: positions counted up to P - 1 (x-transformers' cope_max_pos)",
                         lambda x: x >= 2, ">= 2"),
    }
    summary = "contextual positions: counts of gates σ(q·k) between key and query, learned e[p] interpolated"

    def __init__(self, n_heads: int, head_dim: int, **values) -> None:
        super().__init__(n_heads, head_dim, **values)
        self.pos_emb = nn.Parameter(torch.zeros(values["max_pos"], head_dim))  # e [P, h]

    def scores(self, q, k, q_pos, k_pos, *, transformed=False, bias=None, visible=None, context=None) -> Tensor:
        """[b, h, n_q, n_k]: q·k/√h + z(p). ``visible`` [n_q, n_k] (the pattern's mask; default: the
        causal mask by position) decides which keys count."""
        q_pos = torch.as_tensor(q_pos, device=q.device)
        k_pos = torch.as_tensor(k_pos, device=k.device)
        if visible is None:
            visible = q_pos[:, None] >= k_pos[None, :]
        logits = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)  # [b, h, n_q, n_k]
        gates = torch.sigmoid(logits).masked_fill(~visible, 0.0)
        count = gates.flip(-1).cumsum(-1).flip(-1).clamp(max=self.values["max_pos"] - 1)  # p_ij: Σ over t >= j
        z = q @ self.pos_emb.to(q.dtype).T  # [b, h, n_q, P]: q_i·e[p] at every integer p
        low = count.floor()
        frac = count - low
        z_low = z.gather(-1, low.long())
        z_high = z.gather(-1, count.ceil().long())
        return logits + z_high * frac + z_low * (1 - frac)
