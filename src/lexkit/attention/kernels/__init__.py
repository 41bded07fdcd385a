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

# the rooms: attention (the forward's shared state and the dispatch), dense, chunked, flex (the three
# kernels), step (one block of queries), choice (which kernel), record (which ran)
from . import chunked, dense, flex, step  # noqa: F401
from .attention import RUNS, Attention  # noqa: F401
from .choice import (  # noqa: F401
    CPU_FLEX_REFUSAL,
    DENSE_MAX,
    KERNELS,
    LOCAL_DENSE_MAX,
    by_scores,
    choose_kernel,
    refuse_cpu_flex,
    sdpa_causal,
)
from .flex import (  # noqa: F401
    FLEX_BLOCK,
    FLEX_DECISIONS,
    FLEX_RUNGS,
    build_block_mask,
    cached_block_mask,
    compiled_flex,
    flex_available,
    flex_key,
    flex_label,
    flex_query_blocks,
    flex_score_mod,
    kernel_failure,
)
from .record import kernel_label, note_ran, record_kernels  # noqa: F401
from .step import ScoreHook, attend_block, query_block  # noqa: F401
# what a test or a user tunes (CHUNK, SCORE_BUDGET: kernels.step; FLEX_RUNGS, FLEX_DECISIONS: kernels.flex;
# CPU_FLEX_REFUSAL: kernels.choice) lives in the room that reads it and is not named here, so that setting
# it here, where no kernel would see it, fails
