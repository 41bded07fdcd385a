"""One block of queries against the keys it may see (the block step the chunked kernel, the dense kernel
run by scores and the KV cache all call), and how many queries a block takes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor

from ...positions.base import ForwardBias, Scheme
from ..modifiers import rows
from ..patterns import Pattern

CHUNK = 256  # query block of the chunked kernel
SCORE_BUDGET = 1 << 25  # scores one block may hold (128 MB in float32); past it the query block shrinks


class ScoreHook(Protocol):
    def __call__(self, layer: int, q_idx: Tensor, k_idx: Tensor, scores: Tensor, probs: Tensor) -> None:
        """scores, probs: [batch, heads, n_q, n_k] for query indices q_idx [n_q] and key indices
        k_idx [n_k] (indices into the input); masked scores are -inf and their probs 0."""


def attend_block(
    scheme: Scheme,
    pattern: Pattern,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_idx: Tensor,
    k_idx: Tensor,
    q_pos: Tensor,
    k_pos: Tensor,
    *,
    transformed: bool,
    bias: ForwardBias | None,
    hook: ScoreHook | None = None,
    layer: int = 0,
    q_scale: Tensor | None = None,
    rescore: Callable[[Tensor], Tensor] | None = None,
    sink: Tensor | None = None,
    score_fn: Callable[[Tensor], Tensor] | None = None,
    context: tuple[Tensor, Tensor] | None = None,
    position_fn: Callable[[Tensor, Tensor, Tensor], Tensor] | None = None,
    row_fn: Callable[[Tensor, Tensor | None], Tensor] | None = None,
    weights: Callable[..., Tensor] | None = None,
    carry: dict | None = None,
) -> Tensor:
    """One block of queries against the keys it may see: softmax(where(visible, scores, -inf)) @ v.

    q: [b, h, n_q, d] at input indices q_idx [n_q] and positions q_pos [n_q]; k, v: [b, h, n_k, d]
    at k_idx, k_pos [n_k]. Scores come from :meth:`Scheme.scores` (the reference path; it also gets
    the block's mask and the rows of a per-layer ``context``, which the data-dependent schemes
    read), then ``rescore`` (sinks at their cache slots) and a temperature's ``q_scale`` [n_q] or
    [h, n_q] (the whole score, bias included); the mask from the pattern's predicate. ``sink`` [h]:
    a learned sink logit per head, a virtual key of value 0 beside the visible ones (GPT-OSS), not
    scaled by the temperature; the hook then sees probabilities that sum to less than 1.
    ``position_fn``: an elementwise function of the scores and the positions of query and key
    (scale-invariant attention), after the temperature; ``score_fn``: one of the scores alone
    (soft-capping), after it, before the mask; ``row_fn``: a function of each query's whole row of
    masked scores (and the sink's column), last before the softmax (the adaptive temperature).
    ``weights(scores, visible, q_idx, k_idx)``: an attention variant's weights in place of the
    softmax (:meth:`Modifier.weights`, stick-breaking), given ``carry``: the layer's dict for what
    a variant carries from one block of queries to the next (selective attention's penalty per key;
    blocks come in ascending order); a sink logit, a column of a softmax, has nothing to join
    there. The hook sees their result. The chunked kernel and the KV cache (``cache.py``) both
    call it.
    """
    visible = pattern.visible(q_idx[:, None], k_idx[None, :])  # [n_q, n_k]
    scores = scheme.scores(q, k, q_pos, k_pos, transformed=transformed, bias=bias, visible=visible,
                           context=context)  # [b, h, n_q, n_k]
    if rescore is not None:
        scores = rescore(scores)
    if q_scale is not None:
        scores = scores * rows(q_scale).to(scores.dtype)
    if position_fn is not None:
        scores = position_fn(scores, q_pos[:, None], k_pos[None, :])
    if score_fn is not None:
        scores = score_fn(scores)
    scores = scores.masked_fill(~visible, float("-inf"))
    column = None
    if sink is not None:
        if weights is not None:
            raise ValueError("a learned sink logit is a column of a softmax; this layer's weights replace the softmax")
        b, h, n_q, _ = scores.shape
        column = sink.float()[None, :, None, None].expand(b, h, n_q, 1)
    if row_fn is not None:
        scores = row_fn(scores, column)
    if weights is not None:
        probs = weights(scores.float(), visible, q_idx, k_idx, carry=carry).to(v.dtype)
    elif column is None:
        probs = torch.softmax(scores.float(), dim=-1).to(v.dtype)
    else:
        probs = torch.softmax(torch.cat((scores.float(), column), dim=-1), dim=-1)[..., :-1].to(v.dtype)
    if hook is not None:
        hook(layer, q_idx, k_idx, scores, probs)
    return probs @ v  # [b, h, n_q, d]


def query_block(scheme: Scheme, keys: int = 0, rows: int = 1) -> int:
    """Queries per block of the chunked kernel and the KV cache: ``CHUNK``, fewer when one
    transform may cover only ``max_query_span`` positions (xPos), and fewer when a block's scores
    ([rows = batch x heads, queries, keys]) would pass ``SCORE_BUDGET`` elements: a global layer
    over a million keys scores 16 queries at a time, not 256 (4 GB)."""
    fit = max(16, SCORE_BUDGET // max(1, rows * keys))
    return min(CHUNK, scheme.max_query_span or CHUNK, fit)
