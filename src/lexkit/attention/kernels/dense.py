"""The dense kernel: SDPA with an additive float mask ``where(visible, bias, -inf)`` built once per forward
and shared by all layers (``Attention.dense_mask``), or ``is_causal`` without one; a backward everywhere, the
CPU's training path. Where the scores themselves are needed (a function of them, weights other than the
softmax, ReRoPE) it runs the chunked computation as one block of every query."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .chunked import attend as chunked_attend


def run(att, q: Tensor, k: Tensor, v: Tensor, layer: int, sink: Tensor | None, context: Tensor | None) -> Tensor:
    """``att`` (an :class:`~lexkit.attention.kernels.Attention`) on q, k, v [b, h, n, d] -> [b, h, n, d]."""
    if att.by_scores:  # the reference computation, one block of every query
        return chunked_attend(att, q, k, v, layer, block=max(1, att.n), sink=sink, context=context)
    return attend(att, q, k, v, sink)


def attend(att, q: Tensor, k: Tensor, v: Tensor, sink: Tensor | None = None) -> Tensor:
    """SDPA with the forward's additive mask (``att.dense_mask``): ``is_causal`` where causal without a bias
    or a sink; a sink logit as a virtual first key of value 0."""
    q, k = att.scheme.transform_qk(q, k, att.pos, att.pos)
    q = att.scale_q(q)
    if sink is None and att.pattern.name == "causal" and not att.scheme.has_bias:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=att.scale)  # fused, no mask
    mask = att.dense_mask().to(q.dtype)
    if sink is not None:  # a virtual first key: q·0 = 0 plus the sink logit, value 0
        b, h, n, d = q.shape
        k = torch.cat((k.new_zeros(b, h, 1, d), k), dim=-2)
        v = torch.cat((v.new_zeros(b, h, 1, v.shape[-1]), v), dim=-2)
        column = sink.to(q.dtype)[None, :, None, None].expand(1, h, n, 1)
        mask = torch.cat((column, mask.expand(1, h, n, n)), dim=-1)  # [1, h, n, 1 + n]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=att.scale)  # [b, h, n, d]

