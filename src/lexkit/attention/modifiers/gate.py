"""Gated attention (Qiu et al. 2025, "Gated Attention for Large Language Models: Non-linearity,
Sparsity, and Attention-Sink-Free", arXiv 2505.06708; transformers' ``qwen3_next``): the output of
every head multiplied, before the output projection, by a sigmoid gate computed from the layer's
normalized input X (the paper's G1, the gate "after SDPA")::

    Y'_h = Y_h ⊙ σ(X W_g,h)

* ``gate`` (per channel): W_g is d × d, one gate per feature of every head: the paper's elementwise
  gate, and Qwen3-Next's (its ``q_proj`` emits each head's query and its gate side by side, and
  ``attn_output * sigmoid(gate)`` multiplies feature by feature), so the default;
* ``gate:head``: W_g is d × H, one gate per head over all its features (the paper's headwise gate).

The gate depends on the query's own position only, so a head can output (nearly) nothing where its
attention has nowhere useful to go, instead of parking its mass on a sink. State: the gate's weight
``blocks.i.gate.weight`` [d or H, d], no bias (Qwen3-Next's ``attention_bias`` is False), drawn
from N(0, 0.02²) like every projection of the model (Qwen3-Next's ``initializer_range``), so every
gate starts near σ(0) = 1/2. X is the attention block's input after the ``inputs`` modifiers (token
shift, Canon-A). It acts outside the kernels: every kernel and the KV cache run it unchanged.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ...core.specs import Param
from .base import Modifier, Shape

#: what one gate covers: every feature of every head, or a whole head
PER = ("channel", "head")
#: the standard deviation of the gate's initial weights (the model's, and Qwen3-Next's initializer_range)
INIT_STD = 0.02


def gated(y: Tensor, x: Tensor, weight: Tensor) -> Tensor:
    """Y ⊙ σ(X W_gᵀ): y [b, h, n, hd] the attention output, x [b, n, d], weight [h·hd, d] (per channel)
    or [h, d] (per head) -> [b, h, n, hd]."""
    b, h, n, hd = y.shape
    gate = torch.sigmoid(x @ weight.t().to(x.dtype))  # [b, n, h·hd] or [b, n, h]
    if gate.shape[-1] == h * hd:
        gate = gate.view(b, n, h, hd).transpose(1, 2)  # [b, h, n, hd]
    else:
        gate = gate.transpose(1, 2).unsqueeze(-1)  # [b, h, n, 1]
    return y * gate.to(y.dtype)


class Gate(Modifier):
    """A sigmoid gate on every head's output from the layer's input (Qwen's gated attention, G1)."""

    name = "gate"
    params = {"per": Param(str, "channel", "what one gate covers: channel (every feature, Qwen3-Next's) or head",
                           lambda x: x in PER, " or ".join(PER))}
    positional = "per"
    place = "output"
    summary = "Y·σ(X W_g) on each head's output, per channel (gate) or head (gate:head): Qwen's G1"
    source = "Qiu et al. 2025, arXiv 2505.06708 (transformers' qwen3_next)"
    slot = "gate"

    def state(self, shape: Shape) -> nn.Linear:
        out = shape.d_model if self.values["per"] == "channel" else shape.n_heads
        linear = nn.Linear(shape.d_model, out, bias=False)  # weight [out, d]
        nn.init.normal_(linear.weight, std=INIT_STD)
        return linear

    def output(self, y: Tensor, x: Tensor, state: nn.Linear) -> Tensor:
        return gated(y, x, state.weight)
