"""Which kernel runs: ``auto`` resolved and the combinations that cannot run refused (:func:`choose_kernel`,
the table in docs/kernels.md), a pure function of the device type, scheme, pattern, training, length and
hook."""

from __future__ import annotations

import torch

from ...positions.base import Scheme
from ..modifiers import Scoring
from ..patterns import Pattern
from .flex import flex_available

KERNELS = ("auto", "dense", "chunked", "flex")
DENSE_MAX = 2048  # CPU: longest input the auto choice sends to the dense kernel
LOCAL_DENSE_MAX = 512  # ... under a local pattern (past it the chunked kernel skips unseen keys)


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
