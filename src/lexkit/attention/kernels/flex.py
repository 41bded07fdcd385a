"""The flex kernel: compiled FlexAttention with ``score_mod`` from the scheme's :meth:`Scheme.bias_fn` and a
block mask built from block-level logic (never a dense n x n grid), cached per (pattern, length); forward
only on the CPU, forward and backward on CUDA. A kernel that cannot be built or launched steps down a ladder
of smaller kernel options, then to the chunked kernel (``FLEX_RUNGS``), decided once per (scheme, pattern,
length, dtype, device), with one warning."""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict
from collections.abc import Callable

import torch
from torch import Tensor

from ...positions.base import Scheme
from ..modifiers import rows
from ..patterns import Pattern
from . import chunked

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

    if q_start == 0 and q_stop == n:
        def mask_mod(b, h, q_idx, kv_idx):
            return pattern.visible(q_idx, kv_idx)
    else:  # rows of a query block: one function for every block, its start a tensor (one compile for all)
        offset = torch.tensor(q_start, device=device)

        def mask_mod(b, h, q_idx, kv_idx):
            return pattern.visible(q_idx + offset, kv_idx)

    return BlockMask.from_kv_blocks(*indices(partial), *indices(full), BLOCK_SIZE=tile, mask_mod=mask_mod,
                                    seq_lengths=(n_q, n))


# -- the kernel -----------------------------------------------------------------------------------
def run(att, q: Tensor, k: Tensor, v: Tensor, layer: int, sink: Tensor | None = None,
        context: Tensor | None = None) -> Tensor:
    """The flex kernel through the ladder: torch's kernel options, then smaller tiles and fewer
    stages (``FLEX_RUNGS``), then the chunked kernel; the first that compiles and launches is
    remembered per (scheme, pattern, length, dtype, device) and reported in ``att.ran``."""
    key = flex_key(att.scheme, att.pattern, att.n, q)
    first = FLEX_DECISIONS.get(key, 0)
    failures: list[tuple[int, BaseException]] = []
    for rung in range(first, len(FLEX_RUNGS)):
        try:
            out = flex_pass(att, q, k, v, FLEX_RUNGS[rung], probe=key not in FLEX_DECISIONS)
        except Exception as err:  # noqa: BLE001 - only kernel build/launch failures are caught
            if not kernel_failure(err):
                raise
            failures.append((rung, err))
            continue
        FLEX_DECISIONS[key] = rung
        att.ran = flex_label(rung)
        note_failures(key, failures, att.ran)
        return out
    FLEX_DECISIONS[key] = len(FLEX_RUNGS)
    att.ran = "chunked"
    note_failures(key, failures, att.ran)
    return chunked.attend(att, q, k, v, layer)


def flex_pass(att, q: Tensor, k: Tensor, v: Tensor, options: dict | None, probe: bool) -> Tensor:
    """One FlexAttention evaluation with ``options``. Queries go in one call, or (xPos past
    ``max_query_span``) in equal blocks, each with its decay re-centred at the block's last
    query and all n keys (so every block has one compiled shape); the last block overlaps its
    predecessor and keeps only its new rows. ``probe``: also run the backward once (training),
    so a backward kernel that cannot be built fails here, inside the ladder."""
    flex = compiled_flex()
    bias = att.bias().fn if att.scheme.has_bias else None
    outs, done = [], 0
    for start, stop in flex_query_blocks(att.scheme, att.n):
        whole = stop - start == att.n  # one call: the rotary factors are shared by every layer
        q_pos = att.pos if whole else att.pos[start:stop]
        tq, tk = att.scheme.transform_qk(q if whole else q[..., start:stop, :], k, q_pos, att.pos)
        lam = None if att.q_scale is None else att.q_scale[..., start:stop]
        if lam is not None:
            tq = tq * rows(lam).to(tq.dtype)
        offset = None if whole else torch.tensor(start, device=q.device)
        score_mod = flex_score_mod(bias, lam, offset, att.scoring.score_fn, att.pos[0],
                                   position_fn=att.scoring.position_fn)
        block_mask = cached_block_mask(att.pattern, att.n, q.device, q_start=start, q_stop=stop)
        out = flex(tq, tk, v, score_mod=score_mod, block_mask=block_mask, scale=att.scale, kernel_options=options)
        outs.append(out[..., done - start:, :])
        done = stop
    out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=-2)  # [b, h, n, d]
    if probe and out.requires_grad:
        inputs = tuple(t for t in (q, k, v) if t.requires_grad)
        torch.autograd.grad(out, inputs, torch.zeros_like(out), retain_graph=True)
    return out
