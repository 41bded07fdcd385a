"""A per-layer KV cache trimmed to what an attention pattern can still reach.

A sequence is fed to the model in pieces (a segment of a long document, or one new byte during
generation). For each piece the cache holds, per layer, the keys and values of earlier tokens
that some later query may still see, decided by the pattern alone through
:meth:`Pattern.retained` (``window:W``: the last W - 1 keys; ``bca:W``: the previous block of
W/2 and the current one; ``causal``: every key). Memory is therefore O(reach) per layer under a
local pattern, whatever the length of the sequence, and O(n) under ``causal``. Layers may have
different patterns (a layered model's local and global layers, :class:`LayerRule`): each keeps
what its own pattern can still reach.

Exactness. A query attends to its visible keys only; the keys the cache drops are invisible to
every later query by the pattern's definition, so the softmax runs over the same keys with the
same scores as a one-pass forward. Scores go through the shared block kernel
(:func:`kernels.attend_block`, i.e. :meth:`Scheme.scores` plus the pattern's predicate), with
queries in blocks of ``CHUNK`` as the chunked kernel; so do an attention variant's weights in place
of the softmax (stick-breaking's product runs over the keys between a key and its query, all of them
in the query's block). Positions and pattern indices follow a
one-pass ``model(tokens, offset=o)``: token i of the whole sequence is at index i and position
o + i.

* Position-wise transforms (RoPE, and every scheme without ``max_query_span``) are applied once,
  as tokens arrive; the cache keeps transformed keys.
* ReRoPE keeps raw keys too: its scores are two passes over raw queries and keys.
* xPos keeps raw keys: its decay is re-centred at the last query of each block (see
  ``rotary.py``), so the query factor stays within e^30 and the key factor only shrinks, at any
  position, far past ``max_query_span``.
* A data-dependent scheme's context rows (:meth:`Scheme.context`: the forgetting gates' prefix
  sums) are kept beside the keys, each piece's continuing the last row of the pieces before.
* Bias schemes gather from one bias table by distance, grown on demand (the bias depends on the
  distance only, so a longer table holds the same values); a bias of the query's position too
  (FIRE) is evaluated for each block from the scheme's function (:class:`ForwardBias`).

Inference only: nothing here keeps a graph for backpropagation across pieces.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence

import torch
from torch import Tensor

from ..positions.base import ForwardBias, Scheme
from .kernels import attend_block, note_ran, query_block
from .modifiers import Modifier, Scoring
from .patterns import Pattern

SEGMENT = 4096  # tokens per cached forward when a long input is fed in pieces (eval, a long prompt)


class _Rows:
    """A growable buffer of rows along dim -2 ([b, h, capacity, d]); live rows are [lo, hi).
    Appending is amortised O(new rows); dropping a prefix only moves ``lo``."""

    def __init__(self) -> None:
        self.data: Tensor | None = None
        self.lo = self.hi = 0

    def live(self) -> Tensor | None:
        return None if self.data is None else self.data[..., self.lo : self.hi, :]

    def append(self, x: Tensor) -> Tensor:
        """Add rows x [b, h, n, d]; returns every live row (a view)."""
        n = x.shape[-2]
        if self.data is None:
            self.data = torch.empty((*x.shape[:-2], max(2 * n, 16), x.shape[-1]), dtype=x.dtype, device=x.device)
        elif self.hi + n > self.data.shape[-2]:  # compact, growing when more than half is live
            live = self.hi - self.lo
            cap = self.data.shape[-2]
            if live + n > cap // 2:
                cap = 2 * (live + n)
            fresh = torch.empty((*self.data.shape[:-2], cap, self.data.shape[-1]), dtype=x.dtype, device=x.device)
            fresh[..., :live, :] = self.data[..., self.lo : self.hi, :]
            self.data, self.lo, self.hi = fresh, 0, live
        self.data[..., self.hi : self.hi + n, :] = x
        self.hi += n
        return self.data[..., self.lo : self.hi, :]

    def keep(self, mask: Tensor) -> None:
        """Keep the live rows where ``mask`` [live] is True."""
        if bool(mask.all()):
            return
        kept = torch.nonzero(mask).flatten()
        first = int(kept[0]) if kept.numel() else int(mask.numel())
        if kept.numel() == mask.numel() - first:  # a suffix: move the start
            self.lo += first
            return
        rows = self.data[..., self.lo : self.hi, :].index_select(-2, kept)
        self.data, self.lo, self.hi = None, 0, 0
        self.append(rows)


def _span(mask: Tensor) -> slice | Tensor:
    """The True positions of a 1-D mask: a slice when they are contiguous, else an index tensor."""
    where = torch.nonzero(mask).flatten()
    if where.numel() == 0:
        return slice(0, 0)
    first, last = int(where[0]), int(where[-1])
    return slice(first, last + 1) if last - first + 1 == where.numel() else where


#: The kernels a cached forward can run: the chunked kernel's block step (``auto`` resolves to it).
BLOCK_KERNELS = ("auto", "chunked")


def kernel_refusal(kernel: str) -> str | None:
    """Why ``kernel`` cannot run a cached forward (None: it can): the cache runs the chunked block step."""
    if kernel not in BLOCK_KERNELS:
        return (f"kernel {kernel!r} cannot run through a KV cache "
                "(it runs the chunked block kernel: use auto or chunked)")
    return None


def refusal(scheme: Scheme, pattern: Pattern, kernel: str = "auto", modifiers: Sequence[Modifier] = ()) -> str | None:
    """Why a cache cannot reproduce a one-pass forward of a layer with ``scheme``, ``pattern`` and
    ``modifiers`` on ``kernel`` exactly, or None when it can. Keys are kept transformed as they
    arrive (raw for xPos and ReRoPE, whose scores take raw keys), so a RoPE whose frequencies change
    with the length of each call (dynamic NTK) and sinks scored at their cache slots are refused, as
    is a modifier that says it cannot stream; a cached forward runs the chunked kernel's block step."""
    reason = kernel_refusal(kernel)
    if reason is not None:
        return reason
    if scheme.values.get("scaling") == "dynamic":
        return f"scheme {scheme.spec} changes its frequencies with the length of each call"
    if pattern.cache_positions:
        return f"pattern {pattern.spec} rescores its sinks at their cache slots"
    return next((f"modifier {m.spec}: {m.stream_refusal}" for m in modifiers if m.stream_refusal), None)


def refusal_of(model, pattern: Pattern | str = "causal", kernel: str = "auto") -> str | None:
    """Can ``model`` run ``pattern`` on ``kernel`` through a KV cache exactly? None when it can, else
    why: the one answer every caller asks (streaming evaluation, generation, retrieval's decoding),
    from each layer's :class:`LayerRule` (``model.cache_rules``; a model without them has no cache)."""
    rules = getattr(model, "cache_rules", None)
    if rules is None:
        reason = getattr(model, "cache_refusal", None)  # a model that says why it has none (hf:)
        return reason(pattern, kernel) if reason is not None else (
            f"{type(model).__name__} has no KV cache: this needs a model with a KV cache (new_cache), "
            "such as lexkit.GPT")
    found = layer_refusal(rules(pattern), kernel)
    if found is None:
        return None
    layer, reason = found
    return reason if layer is None else f"layer {layer}: {reason}"


def layer_refusal(layers: Sequence[LayerRule], kernel: str = "auto") -> tuple[int | None, str] | None:
    """The first layer of ``layers`` a cache cannot reproduce on ``kernel`` (:func:`refusal`) and
    why: (its index, or None when every layer is the same, the reason); None when none is refused."""
    uniform = all(rule.same(layers[0]) for rule in layers)
    for i, rule in enumerate(layers):
        reason = refusal(rule.scheme, rule.pattern, kernel, rule.modifiers)
        if reason is not None:
            return None if uniform else i, reason
    return None


def use_cache(model, kernel: str, cache: bool | None, pattern: Pattern | str = "causal",
              what: str = "generate") -> bool:
    """The cache policy of every decoding caller: ``cache=None`` (auto) runs through a KV cache when
    :func:`refusal_of` says the model can; ``True`` insists (a ValueError with the reason when it
    cannot); ``False`` never."""
    reason = refusal_of(model, pattern, kernel)
    if cache is None:
        return reason is None
    if cache and reason is not None:
        raise ValueError(f"cannot {what} through a KV cache (--cache, cache=True): {reason}; "
                         f"{what} without one (--no-cache)")
    return bool(cache)


def decode(model, context: Tensor, choose: Callable[[Tensor, int], int], *, pattern: Pattern | str = "causal",
           cached: bool, kernel: str = "auto", steps: int | None = None) -> Iterator[int]:
    """The one decoding loop (generation, a subject's greedy continuation): the next tokens after
    ``context`` [T] (int64, on the model's device), token i chosen by ``choose(logits, i)`` from the
    last position's logits [vocab]; ``steps`` of them (None: without end). ``cached`` (the caller's
    :func:`use_cache`): the context fed through a KV cache in :data:`SEGMENT`-token pieces, then one
    token a forward; else one plain forward of the whole context a token on ``kernel``. No forward
    runs past the last token asked for; the caller holds eval and inference mode."""
    if cached:
        kv = model.new_cache(pattern)
        for start in range(0, context.numel(), SEGMENT):
            logits = model(context[None, start : start + SEGMENT], pattern=pattern, cache=kv)[0, -1]
    i = 0
    while steps is None or i < steps:
        if not cached:
            logits = model(context[None], pattern=pattern, kernel=kernel)[0, -1]
        token = choose(logits, i)
        yield token
        i += 1
        step = torch.tensor([token], dtype=torch.int64, device=context.device)
        if cached:
            if steps is None or i < steps:
                logits = model(step[None], pattern=pattern, cache=kv)[0, -1]
        else:
            context = torch.cat((context, step))


@dataclasses.dataclass(frozen=True)
class LayerRule:
    """What one layer's attention is, for a cache: its scheme, pattern, what its score modifiers do
    (:class:`Scoring`) and every modifier (whether each can stream)."""

    scheme: Scheme
    pattern: Pattern
    scoring: Scoring = dataclasses.field(default_factory=Scoring)
    modifiers: tuple[Modifier, ...] = ()

    def same(self, other: LayerRule) -> bool:
        return (self.scheme is other.scheme and self.pattern == other.pattern
                and self.scoring.key == other.scoring.key and self.modifiers == other.modifiers)


class _Lane:
    """The kept keys of the layers that share a (scheme, pattern): which input indices they keep and
    the scheme's bias (its distance table grown on demand)."""

    def __init__(self, scheme: Scheme, pattern: Pattern) -> None:
        self.scheme, self.pattern = scheme, pattern
        self.k_idx: Tensor | None = None  # [n_kept] input indices of the kept keys, ascending
        self._bias: ForwardBias | None = None

    def extend(self, q_idx: Tensor, seen: int, device) -> _Piece:
        k_idx = q_idx if self.k_idx is None else torch.cat((self.k_idx.to(device), q_idx))
        keep = self.pattern.retained(k_idx, seen)  # [n_k] what the next piece can still see
        self.k_idx = k_idx[keep]
        if self.scheme.has_bias:
            need = int(q_idx[-1] - k_idx[0]) + 1  # the longest distance of this piece
            if self._bias is None or not self._bias.covers(need):
                have = 0 if self._bias is None else self._bias.table.shape[1]
                self._bias = self.scheme.forward_bias(max(need, 2 * have), device=device)
        return _Piece(self, q_idx, k_idx, keep, self._bias)


class KVCache:
    """Keys and values of every layer for one sequence fed in pieces (``GPT.forward(...,
    cache=...)``). ``layers``: each layer's :class:`LayerRule` (layers may differ: a local layer
    keeps its window's keys, a global one every key); ``offset`` is the position of the sequence's
    first token, as in a one-pass forward; ``pattern`` the pattern the cache serves (the model's
    resolved pattern, checked on every cached forward). ``seen`` counts the tokens fed so far (the
    next token's index). A layer that :func:`refusal` names is a ValueError naming the layer.

    Layers with the same scheme and pattern share one record of kept key indices (a lane); each
    layer keeps its own rows. ``carried`` holds, per layer, what its modifiers carry across pieces
    (token shift's last input rows; :meth:`Modifier.inputs`)."""

    def __init__(self, layers: Sequence[LayerRule], *, offset: int = 0, pattern: Pattern | None = None) -> None:
        layers = list(layers)
        if not layers:
            raise ValueError("a KV cache needs at least one layer")
        found = layer_refusal(layers)
        if found is not None:
            layer, reason = found
            raise ValueError(f"no KV cache for this model{'' if layer is None else f' (layer {layer})'}: {reason}")
        self.layers, self.offset = layers, int(offset)
        self.pattern = pattern if pattern is not None else layers[0].pattern
        self.seen = 0
        lanes: dict[tuple[int, str], _Lane] = {}
        self.lane_of = [lanes.setdefault((id(r.scheme), r.pattern.spec), _Lane(r.scheme, r.pattern)) for r in layers]
        self.lanes = list(lanes.values())
        self.keys = [_Rows() for _ in layers]
        self.values = [_Rows() for _ in layers]
        self.contexts = [_Rows() for _ in layers]  # a data-dependent scheme's rows, kept as its keys
        self.last_context: list[Tensor | None] = [None] * len(layers)  # [b, h, 1, c]: the last token's row
        #: per layer, what its modifiers carry from one piece to the next (token shift's last row)
        self.carried: list[dict] = [{} for _ in layers]

    @property
    def k_idx(self) -> Tensor | None:
        """Input indices of the keys layer 0 keeps (every layer's, on a uniform model)."""
        return self.lane_of[0].k_idx

    def kept(self, layer: int = 0) -> int:
        """How many keys ``layer`` keeps now."""
        k_idx = self.lane_of[layer].k_idx
        return 0 if k_idx is None else int(k_idx.numel())

    def __len__(self) -> int:
        """How many keys layer 0 keeps now (every layer's, on a uniform model; :meth:`kept` per layer)."""
        return self.kept(0)

    def extend(self, n: int, device: torch.device | str) -> tuple[Tensor, list[CachedAttention]]:
        """Start a piece of ``n`` tokens: their positions [n] and, per layer, the attention it calls
        (which appends the layer's keys and values, then trims them for the next piece)."""
        if n <= 0:
            raise ValueError(f"a cached forward needs at least one token, got {n}")
        q_idx = torch.arange(self.seen, self.seen + n, device=device)
        pos = q_idx + self.offset
        self.seen += n
        pieces = {id(lane): lane.extend(q_idx, self.seen, device) for lane in self.lanes}
        calls = [CachedAttention(self, layer, pieces[id(self.lane_of[layer])], pos, rule.scoring)
                 for layer, rule in enumerate(self.layers)]
        return pos, calls


class _Piece:
    """One piece of one lane: its queries' indices, the keys they may see, what to keep after."""

    def __init__(self, lane: _Lane, q_idx: Tensor, k_idx: Tensor, keep: Tensor, table: ForwardBias | None) -> None:
        self.lane, self.q_idx, self.k_idx, self.keep, self.table = lane, q_idx, k_idx, keep, table
        self._spans: list[tuple[slice, slice | Tensor]] | None = None

    def spans(self, block: int) -> list[tuple[slice, slice | Tensor]]:
        """(queries, keys) per block of queries, shared by the lane's layers: the keys some query of
        the block may see (retained for its first query, not after its last)."""
        if self._spans is None:
            n = self.q_idx.shape[0]
            self._spans = []
            for start in range(0, n, block):
                stop = min(start + block, n)
                first, last = self.q_idx[start], self.q_idx[stop - 1]
                sel = _span(self.lane.pattern.retained(self.k_idx, int(first)) & (self.k_idx <= last))
                self._spans.append((slice(start, stop), sel))
        return self._spans


class CachedAttention:
    """Attention of one layer for one piece: the piece's queries against the layer's cached and new keys."""

    def __init__(self, cache: KVCache, layer: int, piece: _Piece, q_pos: Tensor, scoring: Scoring) -> None:
        self.cache, self.layer, self.piece, self.q_pos, self.scoring = cache, layer, piece, q_pos, scoring
        self.k_pos = piece.k_idx + cache.offset

    def __call__(self, q: Tensor, k: Tensor, v: Tensor, layer: int | None = None, x: Tensor | None = None) -> Tensor:
        """q, k, v: [batch, heads, n, head_dim] of the piece's tokens, before the position
        transform -> [batch, heads, n, head_dim]. ``x`` [batch, n, d_model]: the layer's input,
        which a data-dependent scheme reads (its context continues the cached one's)."""
        cache, piece, layer = self.cache, self.piece, self.layer
        scheme, pattern = piece.lane.scheme, piece.lane.pattern
        q_scale = self.scoring.query_scale(self.q_pos)  # [n] or [H, n] or None
        sink, score_fn, weights = self.scoring.sink(), self.scoring.score_fn, self.scoring.weights
        position_fn, row_fn = self.scoring.position_fn, self.scoring.row_fn(False)  # inference only
        pre = scheme.max_query_span is None and scheme.separable  # position-wise: once, as tokens arrive
        if pre:
            q, k = scheme.transform_qk(q, k, self.q_pos, self.q_pos)
        keys = cache.keys[layer].append(k)  # [b, h, n_k, d]
        values = cache.values[layer].append(v)
        rows = kept = None
        if scheme.has_context and x is not None:
            rows = scheme.context(x, cache.last_context[layer])  # [b, h, n, c]
            cache.last_context[layer] = rows[..., -1:, :]
            kept = cache.contexts[layer].append(rows)
        out = [
            attend_block(
                scheme, pattern, q[..., qs, :], keys[..., ks, :], values[..., ks, :],
                piece.q_idx[qs], piece.k_idx[ks], self.q_pos[qs], self.k_pos[ks],
                transformed=pre, bias=piece.table, sink=sink, score_fn=score_fn, weights=weights,
                carry=cache.carried[layer], position_fn=position_fn, row_fn=row_fn,
                q_scale=None if q_scale is None else q_scale[..., qs],
                context=None if rows is None else (rows[..., qs, :], kept[..., ks, :]),
            )
            for qs, ks in piece.spans(query_block(scheme, len(piece.k_idx), q.shape[0] * q.shape[1]))
        ]
        cache.keys[layer].keep(piece.keep)
        cache.values[layer].keep(piece.keep)
        if rows is not None:
            cache.contexts[layer].keep(piece.keep)
        note_ran("chunked")  # the chunked block kernel over the cached keys
        return torch.cat(out, dim=-2)  # [b, h, n, d]
