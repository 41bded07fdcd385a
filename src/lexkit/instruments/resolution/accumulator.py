"""The blockwise accumulation of s_hat by distance: :class:`Accumulator`, a score hook that sums the
visible scores at each distance (and each query's attention entropy) one query block at a time, memory
O(n x block), never O(n^2); :func:`diagonal_sums` folds a block's diagonals into columns. The empirical
pass (:mod:`.empirical`) runs it on a model's scores, the analytic curve of an absolute scheme
(:mod:`.curves`) on the scheme's own table."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ...attention import Pattern, layer_patterns
from .formula import entropy


def diagonal_sums(a: Tensor, dtype: torch.dtype = torch.float64) -> Tensor:
    """Sums along the diagonals of ``a`` ``[..., n_q, n_k]``: ``[..., n_q + n_k + 1]`` (in ``dtype``)
    whose column c holds the sum of a[i, j] over j - i = c - n_q (columns 0 and n_q + n_k are 0).

    The skew trick: ``a`` is copied into a zeroed ``[..., n_q, n_q + n_k + 1]`` buffer through a
    strided view that puts a[i, j] at column j - i + n_q, so each diagonal lands in one column and
    a sum over rows finishes it. O(n_q·n_k), no gather, no index tensors.
    """
    n_q, n_k = a.shape[-2:]
    lead = a.shape[:-2]
    row = n_q + n_k + 1
    buf = torch.empty(*lead, n_q, row, dtype=dtype, device=a.device)
    outer = buf.stride()[:-2]
    # flat, each [n_q, row] matrix is: n_q zeros, then n_q runs of (n_k values, n_q zeros)
    buf.as_strided((*lead, n_q), (*outer, 1), 0).zero_()
    buf.as_strided((*lead, n_q, n_q), (*outer, row - 1, 1), n_q + n_k).zero_()
    buf.as_strided((*lead, n_q, n_k), (*outer, row - 1, 1), n_q).copy_(a)  # [i, j] -> [i, j - i + n_q]
    return buf.sum(-2)


def _contiguous(idx: Tensor) -> bool:
    return idx.numel() > 0 and int(idx[-1]) - int(idx[0]) == idx.numel() - 1 and bool((idx.diff() == 1).all())


class Accumulator:
    """A score hook (``hook(layer, q_idx, k_idx, scores, probs)``) that accumulates, per layer
    and head, the sum of visible scores at each distance and their count, and the attention
    entropy of every query. Memory: ``[layers, heads, length]`` plus one block.

    ``curve()`` is s_hat ``[layers, heads, length]`` (float64, -inf where nothing was visible);
    ``entropy()`` the mean entropy per query ``[layers, heads]`` (nats).
    """

    def __init__(self, layers: int, heads: int, length: int, pattern: Pattern) -> None:
        self.patterns, self.length = layer_patterns(pattern, layers), length  # each layer's (a layered model's differ)
        self.sums = torch.zeros(layers, heads, length, dtype=torch.float64)
        self.counts = torch.zeros(layers, length, dtype=torch.float64)
        self.ent = torch.zeros(layers, heads, dtype=torch.float64)
        self.queries = torch.zeros(layers, dtype=torch.float64)
        self._blocks: dict[tuple[str, int, int, int, int], tuple[Tensor, Tensor, Tensor]] = {}

    def __call__(self, layer: int, q_idx: Tensor, k_idx: Tensor, scores: Tensor, probs: Tensor | None) -> None:
        q_idx, k_idx = q_idx.cpu(), k_idx.cpu()
        vis = self.patterns[layer].visible(q_idx[:, None], k_idx[None, :])  # [n_q, n_k]
        batch = scores.shape[0]
        values = torch.where(vis.to(scores.device), scores, 0.0)  # [b, heads, n_q, n_k]
        values = (values.sum(0) if batch > 1 else values[0]).cpu()
        if _contiguous(q_idx) and _contiguous(k_idx):
            # diagonals -> columns: no gather; d = q0 - k0 + n_q - column
            key = (self.patterns[layer].spec, int(q_idx[0]), q_idx.numel(), int(k_idx[0]), k_idx.numel())
            if key not in self._blocks:  # depends on the layer's pattern and the block: once per pair
                d = key[1] - key[3] + key[2] - torch.arange(key[2] + key[4] + 1)
                keep = (d >= 0) & (d < self.length)
                self._blocks[key] = (d[keep], keep, diagonal_sums(vis)[keep])
            d, keep, count = self._blocks[key]
            self.sums[layer].index_add_(1, d, diagonal_sums(values)[:, keep])
            self.counts[layer].index_add_(0, d, batch * count)
        else:
            dist = (q_idx[:, None] - k_idx[None, :])[vis]  # [n_vis]
            self.sums[layer].index_add_(1, dist, values[:, vis].to(torch.float64))
            self.counts[layer].index_add_(0, dist, torch.full(dist.shape, float(batch), dtype=torch.float64))
        if probs is not None:
            p = probs.float()  # float32 terms, float64 totals
            self.ent[layer] += entropy(p).to(torch.float64).sum((0, 2)).cpu()  # [heads]
            self.queries[layer] += batch * q_idx.numel()

    def curve(self) -> Tensor:
        counts = self.counts[:, None, :]
        return torch.where(counts > 0, self.sums / counts.clamp_min(1), torch.full_like(self.sums, -math.inf))

    def count(self) -> Tensor:
        """Visible (text, query) pairs per distance ``[length]`` of layer 0 (every layer's when the
        layers share a pattern; ``counts[layer]`` otherwise)."""
        return self.counts[0]

    def entropy(self) -> Tensor:
        return self.ent / self.queries[:, None].clamp_min(1)
