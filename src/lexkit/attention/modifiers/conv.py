"""Canon layers (Allen-Zhu 2025, "Physics of Language Models: Part 4.1, Architecture Design and the
Magic of Canon Layers", arXiv 2512.17351; facebookresearch/PhysicsLM4): a causal depthwise
convolution of width K with a residual, so each position's features carry those of the K - 1
before it::

    h_t <- h_t + Σ_{j=0}^{K-1} w_j ⊙ h_{t-j}        (h_{t-j} = 0 before the first position)

one weight vector w_j per tap over the channels (depthwise: no mixing across channels), no bias, no
activation (the reference's defaults for Transformers), K = 4 by default (the reference's
``canon_kernel``). Where, by ``at``:

* ``conv:K`` (``at=attn``, Canon-A): on the attention block's normalized input, place ``inputs``,
  the attention part only (d channels);
* ``conv:K,at=qkv`` (Canon-B): on q, k and v after their projection, before the position
  transform, place ``qkv`` (3d channels: q's, then k's, then v's, the reference's order);
* ``conv:K,at=ff`` (Canon-C): on the feed-forward block's normalized input (d channels).

A layer takes one ``+conv`` (one place). State: the weights ``blocks.i.conv`` [C, K] (tap K - 1 is the
current position, tap 0 the one K - 1 back: ``nn.Conv1d``'s layout), initialized as the reference
initializes its ``nn.Conv1d``, U(-1/√K, 1/√K) (Kaiming-uniform with a = √5 over a fan-in of K); the
residual keeps each position's own features at weight 1 + w_{K-1}. Through a KV cache the last K - 1
input rows of the piece before are carried per place, so a streamed sequence equals one pass.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...core.specs import Param
from .base import Modifier, Shape

#: where the convolution acts: the attention input (Canon-A), q/k/v (Canon-B), the feed-forward input (Canon-C)
AT = ("attn", "qkv", "ff")


def causal_conv(h: Tensor, weight: Tensor, previous: Tensor | None = None) -> Tensor:
    """Σ_j w_j ⊙ h_{t-j} per channel: h [b, n, C], weight [C, K] (tap K-1 the current position),
    ``previous`` [b, K-1, C] the rows before h (None: zeros) -> [b, n, C]."""
    rows = _with_previous(h, weight.shape[-1], previous).transpose(1, 2)  # [b, C, K-1+n]
    return F.conv1d(rows, weight.to(h.dtype).unsqueeze(1), groups=h.shape[-1]).transpose(1, 2)


def canon(h: Tensor, weight: Tensor, carry: dict | None, key: tuple) -> Tensor:
    """h + causal_conv(h): h [b, n, C]; through a cache, ``carry[key]`` holds the K-1 rows before."""
    previous = None if carry is None else carry.get(key)
    if carry is not None:  # the last K-1 rows, for the next piece
        carry[key] = _with_previous(h, weight.shape[-1], previous)[:, -(weight.shape[-1] - 1):].detach()
    return h + causal_conv(h, weight, previous)


def _with_previous(h: Tensor, width: int, previous: Tensor | None) -> Tensor:
    """[previous or K-1 rows of zeros; h]: h [b, n, C] -> [b, K-1+n, C]."""
    before = h.new_zeros(h.shape[0], width - 1, h.shape[-1]) if previous is None else previous.to(h.dtype)
    return torch.cat((before, h), dim=1)


def _flat(t: Tensor) -> Tensor:
    """[b, h, n, hd] -> [b, n, h·hd]."""
    return t.transpose(1, 2).reshape(t.shape[0], t.shape[2], -1)


def _heads(t: Tensor, h: int) -> Tensor:
    """[b, n, h·hd] -> [b, h, n, hd]."""
    return t.view(t.shape[0], t.shape[1], h, -1).transpose(1, 2)


class Conv(Modifier):
    """A causal depthwise convolution of width K with a residual (Canon layers A, B, C)."""

    name = "conv"
    params = {
        "K": Param(int, 4, "the width: the position and the K-1 before it", lambda x: 2 <= x <= 64, "in 2..64"),
        "at": Param(str, "attn", "where: attn (Canon-A), qkv (Canon-B), ff (Canon-C)", lambda x: x in AT,
                    " or ".join(AT)),
    }
    positional = "K"
    place = "inputs"  # at=qkv: "qkv" (set per object)
    summary = "h + causal depthwise conv of width K on the attention input (conv:K), q/k/v (at=qkv) or ff"
    source = "Allen-Zhu 2025, arXiv 2512.17351 (Canon layers; facebookresearch/PhysicsLM4)"
    slot = "conv"

    def __init__(self, **values) -> None:
        super().__init__(**values)
        if self.values["at"] == "qkv":
            self.place = "qkv"

    def state(self, shape: Shape) -> nn.Parameter:
        channels = 3 * shape.d_model if self.values["at"] == "qkv" else shape.d_model
        width = self.values["K"]
        bound = 1.0 / math.sqrt(width)
        return nn.Parameter(torch.empty(channels, width).uniform_(-bound, bound))  # [C, K]

    def inputs(self, h: Tensor, state: Tensor, part: str, carry: dict | None) -> Tensor:
        if part != self.values["at"]:
            return h
        return canon(h, state, carry, (self.name, part))

    def qkv(self, q: Tensor, k: Tensor, v: Tensor, state: Tensor, carry: dict | None,
            x: Tensor | None = None, pos: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        heads = q.shape[1]
        joined = torch.cat((_flat(q), _flat(k), _flat(v)), dim=-1)  # [b, n, 3d]
        q2, k2, v2 = canon(joined, state, carry, (self.name, "qkv")).chunk(3, dim=-1)
        return _heads(q2, heads), _heads(k2, heads), _heads(v2, heads)
