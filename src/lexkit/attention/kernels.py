"""Three attention kernels behind one call, all fed by the scheme's and the pattern's single
definitions:

* ``dense``: SDPA with an additive float mask ``where(visible, bias, -inf)`` built once per forward
  and shared by all layers. Has a backward everywhere: the CPU training path.
* ``chunked``: queries in blocks; each block scores only the keys the pattern can make visible
  (``pattern.reach``) through the scheme's reference :meth:`Scheme.scores`. Exact, differentiable,
  O(n·W) time and memory for local patterns, and the path the score hook observes.
* ``flex``: compiled FlexAttention with ``score_mod`` from the scheme's :meth:`Scheme.bias_fn`
  (closed forms from per-head vectors; a table gather only for Sandwich and T5; FIRE's MLP of the
  distance and the query's position) and a block mask
  built from block-level logic (never a dense n x n grid), cached per (pattern, length). Forward
  only on CPU; forward and backward on CUDA. A kernel that cannot be built or launched steps down
  a ladder of smaller kernel options, then to the chunked kernel (``FLEX_RUNGS``), decided once
  per (scheme, pattern, length, dtype, device), with one warning.

``kernel="auto"`` picks (:func:`choose_kernel`, the table in docs/kernels.md): the chunked kernel
when a hook observes scores; on CUDA, SDPA ``is_causal`` for causal without a bias, else flex; on
CPU, dense up to ``DENSE_MAX`` tokens (``LOCAL_DENSE_MAX`` under a local pattern, whose unseen keys
the chunked kernel skips) and chunked past it (on a 2-core CPU a fresh shape costs 4-24 s of
compilation, more than the chunked kernel spends at the lengths we evaluate). What actually ran is
``Attention.ran``, collected by :func:`record_kernels` for metrics and evaluation rows.

A layer's score modifiers reach every kernel through one object, ``scoring=``
(:class:`~lexkit.attention.modifiers.Scoring`, attention/modifiers/): a factor per query or per head
and query (the temperatures: log-n, Llama 4's, a learned SSMax scale; the whole score is scaled,
bias included), an elementwise function of the score and the positions of its query and key
(scale-invariant attention's a(m-n)·s + b(m-n)), one of the score alone (Gemma 2's soft-capping,
C·tanh(s/C)), a function of each query's whole row (the adaptive temperature, from the row's
entropy) and a learned sink logit per head (GPT-OSS: a virtual key with zero value that takes
probability mass), applied in that order. Dense and chunked run all of them (a function of the
scores needs the scores themselves: the dense kernel then runs the block computation as one block,
like ReRoPE); flex scales q and its bias and applies the elementwise functions in its
``score_mod``, and refuses a modifier that says it cannot run there (the sink, a function of whole
rows) by the modifier's own words. An attention variant (place ``attention``) may replace the
softmax by its own weights (stick-breaking's running product over the keys): the block computation
runs them (dense as one block, chunked, the KV cache), SDPA cannot, and flex refuses the variant by
its own words. A scheme that is not one q/k
transform (``separable = False``: ReRoPE) and a pattern that rescores its sinks at cache positions
(``sinks:...,pos=cache``) run through the scheme's :meth:`Scheme.scores`: the chunked kernel, or
the dense kernel as one block over all queries; flex refuses them with a clear error. So do the
data-dependent schemes (CoPE, forgetting gates), which read the pattern's mask of each block and a
per-layer ``context`` (:meth:`Scheme.context`).

Positions need not be contiguous (randomized training positions, Ruoss et al. 2023): distances are
differences of positions on the dense and chunked kernels; flex, which computes them from indices,
refuses such input. Softmax scale: 1/sqrt(head_dim) of the scheme, passed explicitly (PoPE's
transform doubles the dimension of q and k, which would change SDPA's default).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

from ..positions.base import ForwardBias, Scheme
from .modifiers import Scoring, rows
from .patterns import Pattern

KERNELS = ("auto", "dense", "chunked", "flex")
DENSE_MAX = 2048  # CPU: longest input the auto choice sends to the dense kernel
LOCAL_DENSE_MAX = 512  # ... under a local pattern (past it the chunked kernel skips unseen keys)
CHUNK = 256  # query block of the chunked kernel
SCORE_BUDGET = 1 << 25  # scores one block may hold (128 MB in float32); past it the query block shrinks


class ScoreHook(Protocol):
    def __call__(self, layer: int, q_idx: Tensor, k_idx: Tensor, scores: Tensor, probs: Tensor) -> None:
        """scores, probs: [batch, heads, n_q, n_k] for query indices q_idx [n_q] and key indices
        k_idx [n_k] (indices into the input); masked scores are -inf and their probs 0."""


class Attention:
    """Attention for one forward pass: one scheme, one pattern, positions ``pos`` [n].

    Everything that does not depend on the layer (the dense mask, the bias table, the block mask)
    is built at most once per forward and shared by every layer.
    """

    def __init__(
        self,
        scheme: Scheme,
        pattern: Pattern,
        pos: Tensor,
        *,
        kernel: str = "auto",
        hook: ScoreHook | None = None,
        training: bool = False,
        extent: int | None = None,
        scoring: Scoring | None = None,
    ) -> None:
        """``extent``: max(pos) - min(pos) + 1 when the caller knows it (the model's positions
        are contiguous: extent = n), which keeps a compiled forward free of a host sync.
        ``scoring``: what the layer's score modifiers do (a factor per query, an elementwise
        function of the score, a sink logit per head; None: nothing), read at each call inside the
        layer's forward."""
        if kernel not in KERNELS:
            raise ValueError(f"unknown kernel {kernel!r}; valid: {', '.join(KERNELS)}")
        self.scheme, self.pattern, self.pos, self.hook = scheme, pattern, pos, hook
        self.n = pos.shape[0]
        if extent is None:  # positions one transform covers
            extent = int(pos.max() - pos.min()) + 1 if self.n else 0
        self.scoring = scoring if scoring is not None else Scoring()
        self.training = training
        self.kernel = choose_kernel(
            kernel, scheme, pattern, self.n, pos.device, training, hook is not None, extent=extent,
            scoring=self.scoring,
        )
        self.extent = extent
        self.scale = 1.0 / math.sqrt(scheme.head_dim)  # the scheme's, whatever the width of its q and k
        self._mask: Tensor | None = None
        self._bias: ForwardBias | None = None
        self._scale: Tensor | None = None
        self._scaled = False
        # a function of the scores or of whole rows, or weights other than the softmax, need the
        # scores: the dense kernel runs the block computation
        self.by_scores = by_scores(scheme, pattern) or self.scoring.needs_block(training)
        #: the kernel the last call actually ran: ``self.kernel``, or for flex the ladder's rung
        #: (``flex``, ``flex:128x64/2``) or ``chunked`` when no flex kernel could be built
        self.ran = self.kernel

    def __call__(self, q: Tensor, k: Tensor, v: Tensor, layer: int = 0, x: Tensor | None = None) -> Tensor:
        """q, k, v: [batch, heads, n, head_dim] projections before the position transform; ``x``
        [b, n, d_model]: the layer's normalized input, from which a data-dependent scheme computes
        its per-layer context once (:meth:`Scheme.context`, [b, heads, n, c])."""
        context = self.scheme.context(x) if x is not None and self.scheme.has_context else None
        sink = self.scoring.sink()  # [heads] or None: the layer's, read inside its forward
        self.ran = self.kernel
        out = RUNS[self.kernel](self, q, k, v, layer, sink, context)
        note_ran(self.ran)
        return out

    # -- the kernels by name (:data:`RUNS`): each (q, k, v, layer, sink, context) -> [b, h, n, d] --------
    def _run_dense(self, q: Tensor, k: Tensor, v: Tensor, layer: int, sink: Tensor | None,
                   context: Tensor | None) -> Tensor:
        if self.by_scores:  # the reference computation, one block of every query
            return self._chunked(q, k, v, layer, block=max(1, self.n), sink=sink, context=context)
        return self._dense(q, k, v, sink)

    def _run_chunked(self, q: Tensor, k: Tensor, v: Tensor, layer: int, sink: Tensor | None,
                     context: Tensor | None) -> Tensor:
        return self._chunked(q, k, v, layer, sink=sink, context=context)

    def _run_flex(self, q: Tensor, k: Tensor, v: Tensor, layer: int, sink: Tensor | None,
                  context: Tensor | None) -> Tensor:
        return self._flex(q, k, v, layer)  # sets self.ran: flex, a smaller flex, or chunked

    @property
    def q_pos(self) -> Tensor:
        """The queries' positions [n] (every position of the forward), as the KV cache's calls say theirs."""
        return self.pos

    @property
    def q_scale(self) -> Tensor | None:
        """The factor per query [n] or per head and query [H, n] (None: none), computed at the first
        call, inside the layer's forward: a learned temperature's parameters belong to its layer
        (under FSDP2 they are gathered only there)."""
        if not self._scaled:
            self._scale, self._scaled = self.scoring.query_scale(self.pos), True
        return self._scale

    # -- dense --------------------------------------------------------------------------------
    def dense_mask(self) -> Tensor:
        """[1, heads or 1, n, n] additive float mask: bias where visible, -inf elsewhere (4-D, so
        SDPA can take its fused CPU kernel rather than the math fallback)."""
        if self._mask is None:
            idx = torch.arange(self.n, device=self.pos.device)
            visible = self.pattern.visible(idx[:, None], idx[None, :])  # [n, n]
            if self.scheme.has_bias:
                dist = (self.pos[:, None] - self.pos[None, :]).clamp_min(0)  # [n, n] by position
                bias = self.bias().block(self.pos, dist)  # [H, n, n]
                if self.q_scale is not None:  # a temperature scales the whole score, bias included
                    bias = bias * rows(self.q_scale)
            else:
                bias = torch.zeros((1, self.n, self.n), device=self.pos.device)
            self._mask = bias.masked_fill(~visible, float("-inf"))[None]
        return self._mask

    def _dense(self, q: Tensor, k: Tensor, v: Tensor, sink: Tensor | None = None) -> Tensor:
        q, k = self.scheme.transform_qk(q, k, self.pos, self.pos)
        q = self._scale_q(q)
        if sink is None and self.pattern.name == "causal" and not self.scheme.has_bias:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)  # fused, no mask
        mask = self.dense_mask().to(q.dtype)
        if sink is not None:  # a virtual first key: q·0 = 0 plus the sink logit, value 0
            b, h, n, d = q.shape
            k = torch.cat((k.new_zeros(b, h, 1, d), k), dim=-2)
            v = torch.cat((v.new_zeros(b, h, 1, v.shape[-1]), v), dim=-2)
            column = sink.to(q.dtype)[None, :, None, None].expand(1, h, n, 1)
            mask = torch.cat((column, mask.expand(1, h, n, n)), dim=-1)  # [1, h, n, 1 + n]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale)  # [b, h, n, d]

    # -- chunked ------------------------------------------------------------------------------
    def _chunked(self, q: Tensor, k: Tensor, v: Tensor, layer: int, block: int | None = None,
                 sink: Tensor | None = None, context: Tensor | None = None) -> Tensor:
        block = block or query_block(self.scheme, self.n if self.pattern.reach is None else
                                     self.pattern.reach + CHUNK + self.pattern.sinks, q.shape[0] * q.shape[1])
        # a position-wise transform (all but xPos and ReRoPE) commutes with slicing: do it once
        pre = self.scheme.max_query_span is None and self.scheme.separable
        raw_q, raw_k = q, k
        if pre:
            q, k = self.scheme.transform_qk(q, k, self.pos, self.pos)
        table = self.bias() if self.scheme.has_bias else None
        scoring = self.scoring  # its functions read once a forward (the layer's state, inside its forward)
        score_fn, position_fn, row_fn = scoring.score_fn, scoring.position_fn, scoring.row_fn(self.training)
        weights = scoring.weights
        carry: dict = {}  # what a variant carries from one block of queries to the next, this forward
        out = []
        for start in range(0, self.n, block):
            stop = min(start + block, self.n)
            q_idx = torch.arange(start, stop, device=q.device)
            k_idx = self.pattern.keys(start, stop, device=q.device)  # [n_k]: sinks, then the reach
            k_sel = slice(int(k_idx[0]), stop) if len(k_idx) == stop - int(k_idx[0]) else k_idx
            rescore = None
            if self.pattern.cache_positions:
                def rescore(scores, s=start, e=stop, qi=q_idx, ki=k_idx):
                    return self._rescore_sinks(scores, raw_q[..., s:e, :], raw_k, qi, ki, table)
            ctx = None if context is None else (context[..., start:stop, :], context[..., k_sel, :])
            out.append(attend_block(
                self.scheme, self.pattern, q[..., start:stop, :], k[..., k_sel, :], v[..., k_sel, :],
                q_idx, k_idx, self.pos[start:stop], self.pos[k_sel], transformed=pre, bias=table,
                hook=self.hook, layer=layer, q_scale=None if self.q_scale is None else self.q_scale[..., start:stop],
                rescore=rescore, sink=sink, score_fn=score_fn, context=ctx, position_fn=position_fn, row_fn=row_fn,
                weights=weights, carry=carry,
            ))
        return torch.cat(out, dim=-2)  # [b, h, n, d]

    def _rescore_sinks(self, scores: Tensor, q: Tensor, k: Tensor, q_idx: Tensor, k_idx: Tensor, table) -> Tensor:
        """Sink columns (the first ``n_s`` keys, indices 0 .. n_s-1) scored with each query at its
        cache slot (``pattern.sink_query_index``): StreamingLLM's positions within the cache.
        q: [b, h, n_q, d] raw block queries, k: [b, h, n, d] raw keys."""
        n_s = int((k_idx < self.pattern.sinks).sum())
        if n_s == 0:
            return scores
        q_pos = self.pos[q_idx] - q_idx + self.pattern.sink_query_index(q_idx)  # [n_q]
        sink = self.scheme.scores(q, k[..., :n_s, :], q_pos, self.pos[:n_s], bias=table)  # [b, h, n_q, n_s]
        return torch.cat((sink.to(scores.dtype), scores[..., n_s:]), dim=-1)

    def _scale_q(self, q: Tensor) -> Tensor:
        """A temperature as q_m <- λ_m q_m (bias rows are scaled where the bias is added)."""
        return q if self.q_scale is None else q * rows(self.q_scale).to(q.dtype)

    def bias(self) -> ForwardBias:
        """The scheme's bias over this forward's distances 0 .. extent-1 (built once per forward and
        shared by every layer; differentiable)."""
        if self._bias is None:
            self._bias = self.scheme.forward_bias(self.extent, device=self.pos.device)
        return self._bias

    # -- flex ---------------------------------------------------------------------------------
    def _flex(self, q: Tensor, k: Tensor, v: Tensor, layer: int) -> Tensor:
        """The flex kernel through the ladder: torch's kernel options, then smaller tiles and fewer
        stages (``FLEX_RUNGS``), then the chunked kernel; the first that compiles and launches is
        remembered per (scheme, pattern, length, dtype, device) and reported in ``self.ran``."""
        key = flex_key(self.scheme, self.pattern, self.n, q)
        first = FLEX_DECISIONS.get(key, 0)
        failures: list[tuple[int, BaseException]] = []
        for rung in range(first, len(FLEX_RUNGS)):
            try:
                out = self._flex_pass(q, k, v, FLEX_RUNGS[rung], probe=key not in FLEX_DECISIONS)
            except Exception as err:  # noqa: BLE001 - only kernel build/launch failures are caught
                if not kernel_failure(err):
                    raise
                failures.append((rung, err))
                continue
            FLEX_DECISIONS[key] = rung
            self.ran = flex_label(rung)
            note_failures(key, failures, self.ran)
            return out
        FLEX_DECISIONS[key] = len(FLEX_RUNGS)
        self.ran = "chunked"
        note_failures(key, failures, self.ran)
        return self._chunked(q, k, v, layer)

    def _flex_pass(self, q: Tensor, k: Tensor, v: Tensor, options: dict | None, probe: bool) -> Tensor:
        """One FlexAttention evaluation with ``options``. Queries go in one call, or (xPos past
        ``max_query_span``) in equal blocks, each with its decay re-centred at the block's last
        query and all n keys (so every block has one compiled shape); the last block overlaps its
        predecessor and keeps only its new rows. ``probe``: also run the backward once (training),
        so a backward kernel that cannot be built fails here, inside the ladder."""
        flex = compiled_flex()
        bias = self.bias().fn if self.scheme.has_bias else None
        outs, done = [], 0
        for start, stop in flex_query_blocks(self.scheme, self.n):
            whole = stop - start == self.n  # one call: the rotary factors are shared by every layer
            q_pos = self.pos if whole else self.pos[start:stop]
            tq, tk = self.scheme.transform_qk(q if whole else q[..., start:stop, :], k, q_pos, self.pos)
            lam = None if self.q_scale is None else self.q_scale[..., start:stop]
            if lam is not None:
                tq = tq * rows(lam).to(tq.dtype)
            offset = None if whole else torch.tensor(start, device=q.device)
            score_mod = flex_score_mod(bias, lam, offset, self.scoring.score_fn, self.pos[0],
                                       position_fn=self.scoring.position_fn)
            block_mask = cached_block_mask(self.pattern, self.n, q.device, q_start=start, q_stop=stop)
            out = flex(tq, tk, v, score_mod=score_mod, block_mask=block_mask, scale=self.scale, kernel_options=options)
            outs.append(out[..., done - start:, :])
            done = stop
        out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=-2)  # [b, h, n, d]
        if probe and out.requires_grad:
            inputs = tuple(t for t in (q, k, v) if t.requires_grad)
            torch.autograd.grad(out, inputs, torch.zeros_like(out), retain_graph=True)
        return out


#: each kernel :func:`choose_kernel` may return, by name: what :meth:`Attention.__call__` runs
RUNS: dict[str, Callable[..., Tensor]] = {
    "dense": Attention._run_dense, "chunked": Attention._run_chunked, "flex": Attention._run_flex,
}


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


def by_scores(scheme: Scheme, pattern: Pattern) -> bool:
    """Whether attention must go through :meth:`Scheme.scores` block by block: a scheme that is
    not one q/k transform (ReRoPE) or sinks scored at their cache slots. Dense then runs the
    chunked computation as one block; flex cannot run it."""
    return not scheme.separable or pattern.cache_positions


def sdpa_causal(scheme: Scheme, pattern: Pattern) -> bool:
    """Whether the dense kernel runs as SDPA ``is_causal`` (no mask tensor; flash on CUDA): the
    causal pattern and a scheme without a bias whose scores are one q/k transform."""
    return pattern.name == "causal" and not scheme.has_bias and scheme.separable


def choose_kernel(
    kernel: str,
    scheme: Scheme,
    pattern: Pattern,
    n: int,
    device: torch.device | str,
    training: bool,
    hooked: bool,
    *,
    extent: int | None = None,
    scoring: Scoring | None = None,
) -> str:
    """Resolve ``auto`` and refuse combinations that cannot run (with a clear ValueError): a pure
    function of the device type, scheme, pattern, training or evaluation, length and hook (the
    table in docs/kernels.md).

    ``auto``: a hook observes the chunked kernel. On CUDA: SDPA ``is_causal`` (:func:`sdpa_causal`,
    flash attention), else flex for every mask and bias function it can express, else (ReRoPE,
    sinks at cache positions) dense up to ``DENSE_MAX`` and chunked past it. On the CPU: dense up to
    ``DENSE_MAX`` tokens (``LOCAL_DENSE_MAX`` under a local pattern) and chunked past it (a fresh
    flex shape costs 4-24 s of compilation there, and flex has no backward).

    ``extent`` is max(pos) - min(pos) + 1 (default n, contiguous positions). The dense kernel
    transforms all queries at once, which xPos allows only within ``scheme.max_query_span``; flex
    computes distances from indices and re-centres xPos per query block, which needs contiguous
    positions (extent == n: not randomized training positions). A score modifier that refuses flex
    (the sink logit, a function of whole rows, stick-breaking) runs on dense and chunked only; a
    function of the scores (soft-capping, scale-invariant attention) or weights other than the
    softmax never run as SDPA (no mask tensor can express them): on CUDA ``auto`` takes flex for
    the first where flex can run it."""
    scoring = scoring if scoring is not None else Scoring()
    extent = n if extent is None else extent
    span_ok = scheme.max_query_span is None or extent <= scheme.max_query_span
    flex_span_ok = span_ok or extent == n
    on_cuda = torch.device(device).type == "cuda"
    if pattern.cache_positions and scheme.family == "absolute":
        raise ValueError(f"pattern {pattern.spec} assigns positions within the cache, which needs a relative "
                         f"scheme ({scheme.spec} adds its positions before attention); use pos=text")
    if kernel == "auto":
        if hooked:
            return "chunked"
        if on_cuda:
            if sdpa_causal(scheme, pattern) and span_ok and not scoring.needs_block(training):
                return "dense"
            if (flex_available() and not by_scores(scheme, pattern) and extent == n
                    and scoring.flex_refusal is None):
                return "flex"
            return "dense" if n <= DENSE_MAX and span_ok else "chunked"
        local = pattern.reach is not None and n > LOCAL_DENSE_MAX
        return "dense" if n <= DENSE_MAX and span_ok and not local else "chunked"
    if (kernel == "dense" and not span_ok) or (kernel == "flex" and not flex_span_ok):
        raise ValueError(
            f"{scheme.spec} over {extent} positions exceeds one query span ({scheme.max_query_span}); "
            f"use kernel='chunked' or 'auto'"
        )
    if kernel == "flex":
        _check_flex(scheme, pattern, training and not on_cuda, n, extent)
        if scoring.flex_refusal is not None:
            raise ValueError(scoring.flex_refusal)
        refuse_cpu_flex(kernel, device)
    if hooked and kernel != "chunked":
        raise ValueError("a score hook observes the chunked kernel; use kernel='chunked' or 'auto'")
    return kernel


#: Why kernel 'flex' is refused off CUDA: compiled FlexAttention on the CPU (torch 2.13) returned
#: wrong outputs or NaN at lengths below 128 that are 8 mod 16 and head dims 8 and 16, and two
#: calls could differ (docs/kernels.md). None lifts the refusal: the tests run flex through eager
#: FlexAttention there, a reference path (tests/conftest.py, ``eager_flex``).
CPU_FLEX_REFUSAL: str | None = (
    "kernel 'flex' runs on CUDA only: compiled FlexAttention on the CPU returns wrong numbers or NaN at some "
    "lengths and head dims (torch 2.13; docs/kernels.md); use auto, dense or chunked")


def refuse_cpu_flex(kernel: str, device: torch.device | str) -> None:
    """ValueError for kernel 'flex' on a device other than CUDA (:data:`CPU_FLEX_REFUSAL`); the
    commands call it before a model loads."""
    if kernel == "flex" and torch.device(device).type != "cuda" and CPU_FLEX_REFUSAL:
        raise ValueError(CPU_FLEX_REFUSAL)


def _check_flex(scheme: Scheme, pattern: Pattern, cpu_training: bool, n: int, extent: int) -> None:
    """Refuse kernel 'flex' where it cannot run: two score passes, no flex_attention, a CPU backward,
    positions that are not contiguous (``n`` tokens over ``extent`` positions)."""
    if by_scores(scheme, pattern):
        what, why = ((f"scheme {scheme.spec}", scheme.scores_only) if not scheme.separable else
                     (f"pattern {pattern.spec}", Scheme.scores_only))
        raise ValueError(f"kernel 'flex' cannot run {what}: {why}; use kernel 'dense' or 'chunked'")
    if not flex_available():
        raise ValueError("kernel 'flex' needs torch.nn.attention.flex_attention (torch >= 2.5)")
    if cpu_training:
        raise ValueError("kernel 'flex' has no backward on CPU; train with 'dense' or 'chunked'")
    if extent != n:
        raise ValueError(f"kernel 'flex' needs contiguous positions ({n} tokens span {extent} positions: "
                         "randomized positions?); use kernel 'dense' or 'chunked'")


# -- which kernel ran ------------------------------------------------------------------------------
_RECORDS: list[list[str]] = []


@contextlib.contextmanager
def record_kernels() -> Iterator[list[str]]:
    """Collects, in first-run order, the kernels every attention call inside the block actually
    ran (``Attention.ran``: ``dense``, ``chunked``, ``flex`` or a ladder rung such as
    ``flex:128x64/2``; the KV cache's ``chunked``). Training metrics and evaluation rows report
    them through :func:`kernel_label`."""
    ran: list[str] = []
    _RECORDS.append(ran)
    try:
        yield ran
    finally:
        _RECORDS[:] = [r for r in _RECORDS if r is not ran]


def note_ran(label: str) -> None:
    """Tell every open :func:`record_kernels` that ``label`` ran."""
    for ran in _RECORDS:
        if label not in ran:
            ran.append(label)


def kernel_label(ran: list[str]) -> str | None:
    """One field for a row: the kernels joined by ``+`` (``flex+chunked`` when the ladder fell
    back part-way), or None when no attention ran."""
    return "+".join(ran) or None


# -- FlexAttention plumbing (compiled once, block masks cached, the ladder) ------------------------
_FLEX: Callable | None = None
_BLOCK_MASKS: OrderedDict[tuple, object] = OrderedDict()
_BLOCK_MASK_CACHE = 16
FLEX_BLOCK = 128  # the block mask's tile (FlexAttention's default); kernel tiles must divide it

#: The ladder's rungs: torch's own kernel options first, then smaller forward tiles with 3, 2 and
#: 1 pipeline stages (a float32 tile per stage is what overflows Hopper's 227 KiB of shared
#: memory), each with 64-wide backward tiles and 2 stages. Past the last rung: the chunked kernel.
_BACKWARD_SMALL = {"bwd_BLOCK_M1": 64, "bwd_BLOCK_N1": 64, "bwd_BLOCK_M2": 64, "bwd_BLOCK_N2": 64,
                   "bwd_num_stages": 2}
FLEX_RUNGS: tuple[dict | None, ...] = (
    None,
    {"fwd_BLOCK_M": 128, "fwd_BLOCK_N": 64, "fwd_num_stages": 3, **_BACKWARD_SMALL},
    {"fwd_BLOCK_M": 128, "fwd_BLOCK_N": 64, "fwd_num_stages": 2, **_BACKWARD_SMALL},
    {"fwd_BLOCK_M": 128, "fwd_BLOCK_N": 64, "fwd_num_stages": 1, **_BACKWARD_SMALL},
)
#: (scheme spec, pattern spec, length, dtype, device) -> the first rung that worked (or
#: len(FLEX_RUNGS): the chunked kernel), so later calls go straight to what works
FLEX_DECISIONS: dict[tuple, int] = {}
_WARNED: set[tuple] = set()
#: exception type names and message fragments of a kernel that cannot be built or launched
#: (matched by name: triton need not be installed for the ladder to be tested)
FAILURE_TYPES = ("InductorError", "BackendCompilerFailed", "OutOfResources", "CompilationError",
                 "CUDACompileError")
FAILURE_TEXT = ("No valid triton configs", "out of resource", "OutOfResources")


def flex_label(rung: int) -> str:
    """How ``Attention.ran`` names a flex rung: ``flex`` (torch's options), ``flex:128x64/3``."""
    if rung >= len(FLEX_RUNGS):
        return "chunked"
    options = FLEX_RUNGS[rung]
    if options is None:
        return "flex"
    return f"flex:{options['fwd_BLOCK_M']}x{options['fwd_BLOCK_N']}/{options['fwd_num_stages']}"


def kernel_failure(err: BaseException) -> bool:
    """Whether ``err`` (or an exception it was raised from) says a flex kernel could not be
    compiled or launched: Inductor/Triton errors, by type name or message."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if type(err).__name__ in FAILURE_TYPES or any(text in str(err) for text in FAILURE_TEXT):
            return True
        err = err.__cause__ or err.__context__
    return False


def flex_key(scheme: Scheme, pattern: Pattern, n: int, q: Tensor) -> tuple[str, str, int, str, str]:
    """What the ladder's decision is kept per: (scheme spec, pattern spec, length, dtype, device)."""
    return scheme.spec, pattern.spec, n, str(q.dtype), str(q.device)


def note_failures(key: tuple, failures: list[tuple[int, BaseException]], ran: str) -> None:
    """Warn once per (scheme, pattern, length, dtype, device) when the ladder stepped down: every
    rung that failed (with the first line of its error) and the kernel that runs instead."""
    if not failures or key in _WARNED:
        return
    _WARNED.add(key)
    scheme, pattern, n, dtype, device = key

    def why(err: BaseException) -> str:
        return f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:160]}"

    failed = "; ".join(f"{flex_label(rung)} ({why(err)})" for rung, err in failures)
    warnings.warn(
        f"FlexAttention failed for {scheme} under {pattern} at length {n} ({dtype}, {device}): {failed}; "
        f"running {ran} instead (kept for this scheme, pattern, length, dtype and device)",
        RuntimeWarning,
        stacklevel=4,
    )


def flex_query_blocks(scheme: Scheme, n: int) -> list[tuple[int, int]]:
    """Query blocks of one flex evaluation: [(0, n)], or for a scheme whose transform covers at most
    ``max_query_span`` positions, equal blocks of a multiple of 128 queries within the span, the
    last one ending at n (overlapping its predecessor: every block has the same shape)."""
    span = scheme.max_query_span
    if span is None or n <= span:
        return [(0, n)]
    size = span // FLEX_BLOCK * FLEX_BLOCK or span
    starts = list(range(0, n - size, size)) + [n - size]
    return [(start, start + size) for start in starts]


def flex_score_mod(bias: Callable | None, lam: Tensor | None, offset: Tensor | None,
                   score_fn: Callable | None = None, first: Tensor | None = None, *,
                   position_fn: Callable | None = None) -> Callable | None:
    """FlexAttention ``score_mod`` from a scheme's :meth:`Scheme.bias_fn` (None: no bias), a
    temperature's λ [n_q] or [heads, n_q] (the bias is scaled with the rest of the score; q is
    scaled before), the index of the first query of a block (None: 0), an elementwise function of
    the score (soft-capping, applied last, as the block computation does) and the position of the
    input's first token (None: 0; positions are contiguous on flex, so a query's position is
    ``first`` + its index). ``position_fn``: an elementwise function of the score and the positions
    of query and key (scale-invariant attention), after the bias, before ``score_fn``."""
    if bias is None and score_fn is None and position_fn is None:
        return None
    per_head = lam is not None and lam.dim() == 2

    def score_mod(score, b, h, q_idx, kv_idx):
        m = q_idx if offset is None else q_idx + offset
        if bias is not None:
            bias_mn = bias(h, (m - kv_idx).clamp(min=0), m if first is None else m + first)
            if lam is not None:
                bias_mn = bias_mn * (lam[h, q_idx] if per_head else lam[q_idx])
            score = score + bias_mn
        if position_fn is not None:
            score = position_fn(score, m if first is None else m + first, kv_idx if first is None else kv_idx + first)
        return score if score_fn is None else score_fn(score)

    return score_mod


def flex_available() -> bool:
    try:
        import torch.nn.attention.flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


def compiled_flex() -> Callable:
    """``torch.compile(flex_attention)`` once per process. The recompile limit is raised so new
    lengths compile instead of silently falling back to eager FlexAttention (O(n^2) memory)."""
    global _FLEX
    if _FLEX is None:
        import torch._dynamo
        from torch.nn.attention.flex_attention import flex_attention

        config = torch._dynamo.config
        for name in ("cache_size_limit", "recompile_limit"):
            if hasattr(config, name):
                setattr(config, name, max(getattr(config, name), 256))
        _FLEX = torch.compile(flex_attention, dynamic=False)
    return _FLEX


def cached_block_mask(pattern: Pattern, n: int, device: torch.device, *, q_start: int = 0, q_stop: int | None = None):
    """The pattern's block mask for queries q_start .. q_stop-1 (default all n) against n keys,
    cached per (pattern, n, rows, device)."""
    q_stop = n if q_stop is None else q_stop
    key = (pattern.spec, n, q_start, q_stop, str(device))
    if key in _BLOCK_MASKS:
        _BLOCK_MASKS.move_to_end(key)
        return _BLOCK_MASKS[key]
    mask = build_block_mask(pattern, n, torch.device(device), q_start=q_start, q_stop=q_stop)
    _BLOCK_MASKS[key] = mask
    while len(_BLOCK_MASKS) > _BLOCK_MASK_CACHE:
        _BLOCK_MASKS.popitem(last=False)
    return mask


def build_block_mask(pattern: Pattern, n: int, device: torch.device, *, q_start: int = 0, q_stop: int | None = None):
    """A FlexAttention ``BlockMask`` from block-level logic, without compiling and without an n x n
    grid: for each 128-query tile the predicate is evaluated only on the key tiles holding keys the
    pattern may show (:meth:`Pattern.keys`: the sinks and the keys within reach), each tile
    classified empty, partial (``mask_mod`` applied in the kernel) or full (all pairs visible, in
    range). O(n x reach) work for local patterns, O(n^2/2) booleans in tile-row pieces for causal.
    Queries are rows q_start .. q_stop-1 (the kernel's q_idx counts from q_start)."""
    from torch.nn.attention.flex_attention import BlockMask

    q_stop = n if q_stop is None else q_stop
    n_q, tile = q_stop - q_start, FLEX_BLOCK
    q_tiles, k_tiles = math.ceil(n_q / tile), math.ceil(n / tile)
    partial = torch.zeros(q_tiles, k_tiles, dtype=torch.bool)
    full = torch.zeros(q_tiles, k_tiles, dtype=torch.bool)
    lane = torch.arange(tile)
    for i in range(q_tiles):
        lo, hi = q_start + i * tile, min(q_start + (i + 1) * tile, q_stop)
        cand = torch.unique(pattern.keys(lo, min(hi, n)) // tile)  # key tiles that may hold a visible key
        cand = cand[cand < k_tiles]
        keys = (cand[:, None] * tile + lane).reshape(-1)  # [T * tile]
        q_idx = torch.arange(lo, lo + tile)
        vis = pattern.visible(q_idx[:, None], keys[None, :]) & (keys < n) & (q_idx < hi)[:, None]
        vis = vis.view(tile, len(cand), tile).permute(1, 0, 2).reshape(len(cand), -1)  # [T, tile*tile]
        any_v, all_v = vis.any(-1), vis.all(-1)
        partial[i, cand] = any_v & ~all_v
        full[i, cand] = all_v

    def indices(blocks: Tensor) -> tuple[Tensor, Tensor]:
        counts = blocks.sum(-1).to(torch.int32)  # [q_tiles]
        order = torch.argsort((~blocks).to(torch.int8), dim=-1, stable=True).to(torch.int32)  # visible first
        return counts[None, None].to(device), order[None, None].to(device)

    offset = torch.tensor(q_start, device=device)

    def mask_mod(b, h, q_idx, kv_idx):
        return pattern.visible(q_idx if q_start == 0 else q_idx + offset, kv_idx)

    return BlockMask.from_kv_blocks(*indices(partial), *indices(full), BLOCK_SIZE=tile, mask_mod=mask_mod,
                                    seq_lengths=(n_q, n))
