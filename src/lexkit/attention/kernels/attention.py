"""Attention for one forward pass: the state every kernel shares (the scheme, pattern and positions, the
dense mask, the bias table and a temperature's factors, each built at most once per forward and shared by
every layer) and the dispatch to the kernel :func:`choose_kernel` named (:data:`RUNS`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ...positions.base import ForwardBias, Scheme
from ..modifiers import Scoring, rows
from ..patterns import Pattern
from . import chunked, dense, flex
from .choice import KERNELS, by_scores, choose_kernel
from .record import note_ran
from .step import ScoreHook


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

    def scale_q(self, q: Tensor) -> Tensor:
        """A temperature as q_m <- λ_m q_m (bias rows are scaled where the bias is added)."""
        return q if self.q_scale is None else q * rows(self.q_scale).to(q.dtype)

    def bias(self) -> ForwardBias:
        """The scheme's bias over this forward's distances 0 .. extent-1 (built once per forward and
        shared by every layer; differentiable)."""
        if self._bias is None:
            self._bias = self.scheme.forward_bias(self.extent, device=self.pos.device)
        return self._bias


#: each kernel :func:`choose_kernel` may return, by name: what :meth:`Attention.__call__` runs, each
#: ``(attention, q, k, v, layer, sink, context) -> [b, h, n, d]``
RUNS: dict[str, Callable[..., Tensor]] = {"dense": dense.run, "chunked": chunked.run, "flex": flex.run}
