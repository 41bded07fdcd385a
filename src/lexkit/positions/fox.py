"""Forgetting gates, or data-dependent ALiBi (Lin et al. 2025, "Forgetting Transformer: Softmax
Attention with a Forget Gate", ICLR 2025; x-transformers ``DataDependentAlibi`` /
``attn_data_dependent_alibi``).

Each token t writes a forget gate per head from the layer's normalized input x_t,
f_t = σ(w_h·x_t + b_h), and a query i discounts a key j by every gate in between::

    bias_h(i, j) = Σ_{t=j+1..i} log f_t = F_i - F_j,     F_i = Σ_{t<=i} log σ(w_h·x_t + b_h),

a decay ALiBi would give at a learned, input-dependent rate (ALiBi is the constant gate).

Choices written down (x-transformers', each tested):

* b_h starts at 5 (f ≈ 0.993: a slow decay), w like ``nn.Linear(d_model, H)``'s default
  U(±1/sqrt(d_model)); plain parameters, so the model's N(0, 0.02) init of its linear layers
  leaves them alone. One gate projection per layer (``per_layer``).
* F is a prefix sum over the input in float64, so F_i - F_j keeps float32 accuracy at any length
  (x-transformers sums in float32); keys after the query (masked) get bias 0.

The layer's input reaches the scheme through :meth:`context` (F [b, H, n, 1], once per layer and
forward); the kernels hand each block its query and key rows to :meth:`scores`. Dense and chunked
kernels and the KV cache run it (a piece's prefix sums continue the pieces' before it);
FlexAttention refuses it. Without an input (:meth:`scores` with no context:
the analytic resolution) the gates are those of a zero input, log σ(b_h) per token: an ALiBi of
slope softplus(-b_h) per head; the text's own gates are measured empirically.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.specs import Param
from .base import Scheme, register


@register
class FoX(Scheme):
    """Forgetting gates (FoX; data-dependent ALiBi): bias F_i - F_j, F the prefix sum of
    log σ(w_h·x_t + b_h) over the layer's input."""

    name = "fox"
    family = "contextual"
    separable = False
    scores_only = "its bias sums forget gates computed from each layer's input"
    per_layer = True
    params = {
        "bias_init": Param(float, 5.0, "initial gate bias b (σ(5) ≈ 0.993: slow forgetting)"),
    }
    summary = "forgetting gates: bias Σ log σ(w·x_t + b) over the tokens between key and query"

    def __init__(self, n_heads: int, head_dim: int, **values) -> None:
        super().__init__(n_heads, head_dim, **values)
        d_model = n_heads * head_dim
        bound = 1.0 / math.sqrt(d_model)
        self.weight = nn.Parameter(torch.empty(n_heads, d_model).uniform_(-bound, bound))  # w [H, d]
        self.gate_bias = nn.Parameter(torch.full((n_heads,), float(values["bias_init"])))  # b [H]

    def context(self, x: Tensor, previous: Tensor | None = None) -> Tensor:
        """F [b, H, n, 1] float64: the prefix sums of log σ(w·x_t + b) over x [b, n, d_model],
        continuing ``previous`` (F of the token before x's first, through a KV cache)."""
        log_f = F.logsigmoid(x @ self.weight.T.to(x.dtype) + self.gate_bias.to(x.dtype))  # [b, n, H]
        prefix = log_f.transpose(1, 2).to(torch.float64).cumsum(-1)[..., None]
        return prefix if previous is None else prefix + previous

    def scores(self, q, k, q_pos, k_pos, *, transformed=False, bias=None, visible=None, context=None) -> Tensor:
        """[b, h, n_q, n_k]: q·k/√h + F_i - F_j, ``context`` = (F of the queries [b, H, n_q, 1], F of
        the keys [b, H, n_k, 1]; None: a zero input's)."""
        q_pos = torch.as_tensor(q_pos, device=q.device)
        k_pos = torch.as_tensor(k_pos, device=k.device)
        if context is None:  # a zero input: log σ(b) per token, F at position p = (p + 1)·log σ(b)
            rate = F.logsigmoid(self.gate_bias.to(torch.float64))[:, None, None]  # [H, 1, 1]
            context = ((q_pos + 1).to(torch.float64)[:, None] * rate, (k_pos + 1).to(torch.float64)[:, None] * rate)
        f_q, f_k = context
        decay = f_q - f_k.transpose(-1, -2)  # [b, H, n_q, n_k] float64
        decay = decay.masked_fill(q_pos[:, None] < k_pos[None, :], 0.0)  # keys after the query
        return q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + decay.to(q.dtype)
