"""The chunked kernel: queries in blocks (:mod:`.step`), each block scoring only the keys the pattern can
make visible (``pattern.reach``) through the scheme's reference :meth:`Scheme.scores`. Exact,
differentiable, O(n·W) time and memory for local patterns, and the path the score hook observes."""

from __future__ import annotations

import torch
from torch import Tensor

from . import step


def run(att, q: Tensor, k: Tensor, v: Tensor, layer: int, sink: Tensor | None, context: Tensor | None) -> Tensor:
    """``att`` (an :class:`~lexkit.attention.kernels.Attention`) on q, k, v [b, h, n, d] -> [b, h, n, d]."""
    return attend(att, q, k, v, layer, sink=sink, context=context)


def attend(att, q: Tensor, k: Tensor, v: Tensor, layer: int, block: int | None = None,
             sink: Tensor | None = None, context: Tensor | None = None) -> Tensor:
    block = block or step.query_block(att.scheme, att.n if att.pattern.reach is None else
                                 att.pattern.reach + step.CHUNK + att.pattern.sinks, q.shape[0] * q.shape[1])
    # a position-wise transform (all but xPos and ReRoPE) commutes with slicing: do it once
    pre = att.scheme.max_query_span is None and att.scheme.separable
    raw_q, raw_k = q, k
    if pre:
        q, k = att.scheme.transform_qk(q, k, att.pos, att.pos)
    table = att.bias() if att.scheme.has_bias else None
    scoring = att.scoring  # its functions read once a forward (the layer's state, inside its forward)
    score_fn, position_fn, row_fn = scoring.score_fn, scoring.position_fn, scoring.row_fn(att.training)
    weights = scoring.weights
    carry: dict = {}  # what a variant carries from one block of queries to the next, this forward
    out = []
    for start in range(0, att.n, block):
        stop = min(start + block, att.n)
        q_idx = torch.arange(start, stop, device=q.device)
        k_idx = att.pattern.keys(start, stop, device=q.device)  # [n_k]: sinks, then the reach
        first = att.pattern.first_key(start)  # k_idx[0], known on the host (no sync: a compiled step)
        k_sel = slice(first, stop) if len(k_idx) == stop - first else k_idx
        rescore = None
        if att.pattern.cache_positions:
            def rescore(scores, s=start, e=stop, qi=q_idx, ki=k_idx):
                return rescore_sinks(att, scores, raw_q[..., s:e, :], raw_k, qi, ki, table)
        ctx = None if context is None else (context[..., start:stop, :], context[..., k_sel, :])
        out.append(step.attend_block(
            att.scheme, att.pattern, q[..., start:stop, :], k[..., k_sel, :], v[..., k_sel, :],
            q_idx, k_idx, att.pos[start:stop], att.pos[k_sel], transformed=pre, bias=table,
            hook=att.hook, layer=layer, q_scale=None if att.q_scale is None else att.q_scale[..., start:stop],
            rescore=rescore, sink=sink, score_fn=score_fn, context=ctx, position_fn=position_fn, row_fn=row_fn,
            weights=weights, carry=carry,
        ))
    return torch.cat(out, dim=-2)  # [b, h, n, d]



def rescore_sinks(att, scores: Tensor, q: Tensor, k: Tensor, q_idx: Tensor, k_idx: Tensor, table) -> Tensor:
    """Sink columns (the first ``n_s`` keys, indices 0 .. n_s-1) scored with each query at its
    cache slot (``pattern.sink_query_index``): StreamingLLM's positions within the cache.
    q: [b, h, n_q, d] raw block queries, k: [b, h, n, d] raw keys."""
    n_s = int((k_idx < att.pattern.sinks).sum())
    if n_s == 0:
        return scores
    q_pos = att.pos[q_idx] - q_idx + att.pattern.sink_query_index(q_idx)  # [n_q]
    sink = att.scheme.scores(q, k[..., :n_s, :], q_pos, att.pos[:n_s], bias=table)  # [b, h, n_q, n_s]
    return torch.cat((sink.to(scores.dtype), scores[..., n_s:]), dim=-1)

