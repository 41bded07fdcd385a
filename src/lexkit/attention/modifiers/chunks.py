"""Chunk selection (MoBA: Lu et al. 2025, "MoBA: Mixture of Block Attention for Long-Context LLMs",
arXiv 2502.13189; the family of NSA, InfLLM and Landmark attention, and the chunk top-k of Leng et al.,
ICLR 2026, arXiv 2510.17196): the keys are cut into chunks of C by index, and each query attends
exactly inside n of them, its own and the n − 1 past chunks whose mean-pooled key it scores highest::

    chunk c = keys cC .. cC + C − 1;   query i's own chunk c_i = ⌊i / C⌋ (causal inside it)
    s_ic = mean_{j in c} z_ij  for every past chunk c < c_i  (z the layer's score of i on j)
    S_i = {c_i} ∪ the n − 1 past chunks of largest s_ic (all of them when fewer)
    A_ij = softmax_j(z_ij if ⌊j / C⌋ in S_i and j visible, else −inf)

MoBA's rule, followed as written: its gate is q·mean(K_c), which is the mean of the query's scores
over the chunk when the score is linear in the key (NoPE, RoPE, and any per-query temperature, which
scales every s_ic alike); under a scheme with a bias the mean includes the chunk's mean bias, a
choice of lexkit's. The current chunk is always selected and counts toward n (MoBA's top-k); a past
chunk is scored over all its keys (a past chunk is complete). The choice is a hard top-k with no
gradient of its own: the keys selected learn through the softmax over them, as in MoBA.

Selection needs a query's whole row of scores, so the dense kernel (as one block), the chunked
kernel and the KV cache run it (:meth:`Modifier.weights`); compiled FlexAttention cannot, and says
so. Ties between chunk scores go to the lower chunk index. It replaces the softmax (group
``attention``) and has no sink column to join; it belongs to a global layer, whose reach it cuts."""

from __future__ import annotations

from functools import partial

import torch
from torch import Tensor

from ...core.specs import Param, positive
from .base import Modifier


def chunk_weights(scores: Tensor, visible: Tensor, q_idx: Tensor, k_idx: Tensor, size: int, chunks: int,
                  carry: dict | None = None) -> Tensor:
    """The softmax over each query's selected chunks (module docstring): scores z [b, h, n_q, n_k]
    (-inf where not visible), visible [n_q, n_k], q_idx [n_q], k_idx [n_k] ascending input indices ->
    weights [b, h, n_q, n_k] in float32, 0 outside the query's ``chunks`` chunks of ``size`` keys."""
    z = scores.float().masked_fill(~visible, float("-inf"))
    key_chunk = torch.div(k_idx, size, rounding_mode="floor")  # [n_k]
    own = torch.div(q_idx, size, rounding_mode="floor")  # [n_q]
    first = int(key_chunk.min()) if key_chunk.numel() else 0
    n_chunks = int(key_chunk.max()) - first + 1 if key_chunk.numel() else 0
    member = torch.nn.functional.one_hot(key_chunk - first, n_chunks).to(z.dtype)  # [n_k, C]
    finite = torch.where(visible, z, torch.zeros_like(z))  # [b, h, n_q, n_k]
    counts = visible.to(z.dtype) @ member  # [n_q, C]: the query's visible keys in each chunk
    means = (finite @ member) / counts.clamp_min(1.0)  # [b, h, n_q, C]
    chunk_id = torch.arange(first, first + n_chunks, device=z.device)  # [C]
    past = (chunk_id[None, :] < own[:, None]) & (counts > 0)  # [n_q, C]: candidates besides the own chunk
    rank = means.masked_fill(~past, float("-inf"))
    picks = min(max(int(chunks) - 1, 0), n_chunks)
    chosen = torch.zeros_like(means, dtype=torch.bool)
    if picks > 0:  # the n − 1 best past chunks; a stable sort sends ties to the lower index
        top = rank.sort(dim=-1, descending=True, stable=True).indices[..., :picks]  # [b, h, n_q, picks]
        chosen.scatter_(-1, top, True)
        chosen &= past
    chosen |= (chunk_id[None, :] == own[:, None])  # the query's own chunk, always
    keep = (chosen.to(z.dtype) @ member.T) > 0  # [b, h, n_q, n_k]
    return torch.softmax(z.masked_fill(~keep, float("-inf")), dim=-1)


class Chunks(Modifier):
    """Each query inside its own chunk and the n − 1 past chunks it scores highest (MoBA)."""

    name = "chunks"
    compile_refusal = "reads its chunks' range back from a tensor (data-dependent: a graph break)"
    params = {
        "C": Param(int, 16, "keys per chunk", positive, "> 0"),
        "n": Param(int, 4, "chunks each query attends inside, its own included (MoBA's top-k)", positive, "> 0"),
    }
    positional = "C"
    place = "attention"
    group = "attention"
    summary = "each query inside its own chunk of C keys and the n−1 past chunks of highest mean score (MoBA)"
    source = "Lu et al. 2025, arXiv 2502.13189 (MoBA); Leng et al., ICLR 2026, arXiv 2510.17196"
    flex_refusal = ("kernel 'flex' cannot run chunk selection (each query's chunks are chosen from its whole row "
                    "of scores); use 'dense' or 'chunked'")
    excludes = {"sink": "chunk selection's softmax is over the chosen chunks, and a sink logit is a column of the "
                        "kernel's own softmax"}

    def weights(self, state):
        return partial(chunk_weights, size=self.values["C"], chunks=self.values["n"])

    def inert_at(self, n: int) -> str | None:
        """n positions make ⌈n / C⌉ chunks; a query attends inside its own and up to n − 1 past ones,
        so with ⌈n / C⌉ <= n every query attends inside every chunk it sees (the plain softmax)."""
        size, chunks = self.values["C"], self.values["n"]
        made = -(-int(n) // size)
        if made > chunks:
            return None
        return (f"{n} positions make {made} chunk{'s' if made != 1 else ''} of C = {size} and each query attends "
                f"inside n = {chunks}: every chunk it sees")
