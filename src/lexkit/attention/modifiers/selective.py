"""Selective attention (Leviathan, Kalman, Matias, ICLR 2025, "Selective Attention Improves
Transformer", arXiv 2410.02703, section 3.3; x-transformers' ``selective_attn``, the oracle of
tests/test_selective.py): a token can mask an earlier one for every token after it, and a masked
key stays masked::

    S_kj = the layer's head-0 score of query k on key j (scheme, temperature, cap, mask: -inf unseen)
    F_kj = ReLU(S_kj),  with F_jj = 0 (no token masks itself) and F_k0 = 0 (no token masks the first)
    z_ij <- z_ij - Σ_{k < i} F_kj        for every head, then the softmax over the visible keys

so a key that earlier queries found "done with" (head 0 scored it above zero) fades from the
attention of every later query: the paper's answer to a context filling with keys that no longer
matter, the dilution docs/hunt.md measures on recurring cues.

Choices, each the paper's and x-transformers':

* **Head 0 decides for all heads**, with its own score (no separate projection), and keeps its
  gradient: the gate learns through the penalty it puts on the others.
* **Only the past masks**: query i's penalty sums the queries before it (k < i), so a query's own
  score never penalizes itself, and causality holds.
* **The first key is never masked** (the paper's "<BOS>"; x-transformers' ``no_mask_sos``): key index
  0 of the input, the sink many heads park on.

The penalty on key j grows with every query after it, so it is a sum over *earlier queries* (a
column of the score matrix), not over a query's row: the dense kernel takes it as one block; the
chunked kernel and the KV cache carry Σ_k F_kj per key from one block of queries (and one piece of a
streamed sequence) to the next in ``carry`` (:meth:`Modifier.weights`), so all three are equal.
Compiled FlexAttention, whose ``score_mod`` sees one score at a time, cannot, and says so. It
replaces the softmax (group ``attention``: not beside ``diff``, ``stickbreak`` or ``topk``) and has
no sink column to join."""

from __future__ import annotations

import torch
from torch import Tensor

from .base import Modifier

#: the key of the per-key penalty Σ_k F_kj in a layer's carry: [b, keys seen] by input index
CARRY = "selective"


def selective_weights(scores: Tensor, visible: Tensor, q_idx: Tensor, k_idx: Tensor,
                      carry: dict | None = None) -> Tensor:
    """softmax_j(z_ij - Σ_{k<i} F_kj) over each query's visible keys, F from head 0 (module docstring).

    scores z [b, h, n_q, n_k] (-inf where not visible), visible [n_q, n_k], q_idx [n_q] and k_idx
    [n_k] ascending input indices -> weights [b, h, n_q, n_k] in float32. ``carry``: a dict holding,
    under :data:`CARRY`, Σ_k F_kj over the queries of earlier blocks [b, keys] by key index (read,
    then updated with this block's queries); None: this block is every query there is."""
    z = scores.float().masked_fill(~visible, float("-inf"))
    gate = torch.relu(z[:, 0])  # [b, n_q, n_k]: ReLU(-inf) = 0 where head 0's query does not see the key
    own = (q_idx[:, None] == k_idx[None, :]) | (k_idx == 0)[None, :]  # no token masks itself or the first
    gate = gate.masked_fill(own, 0.0)
    before = gate.cumsum(dim=-2) - gate  # [b, n_q, n_k]: Σ over the block's queries before each
    if carry is not None:
        past = carry.get(CARRY)  # [b, keys seen before]
        size = int(k_idx.max()) + 1
        if past is None:
            past = gate.new_zeros(gate.shape[0], size)
        elif past.shape[-1] < size:
            past = torch.cat((past, past.new_zeros(past.shape[0], size - past.shape[-1])), dim=-1)
        before = before + past[:, k_idx][:, None, :]
        carry[CARRY] = past.index_add(1, k_idx, gate.sum(dim=-2))  # out of place: gradients flow through
    return torch.softmax(z - before[:, None], dim=-1)


class Selective(Modifier):
    """Selective attention: head 0's positive scores mask a key for every later query (Leviathan et al. 2025)."""

    name = "selective"
    params = {}
    place = "attention"
    group = "attention"
    summary = "z_ij -= Σ_{k<i} ReLU(head 0's z_kj) (not a key's own query, never key 0), then the softmax"
    source = "Leviathan, Kalman, Matias, ICLR 2025, arXiv 2410.02703 (x-transformers selective_attn)"
    flex_refusal = ("kernel 'flex' cannot run selective attention (a key's penalty sums every earlier query's "
                    "head-0 score); use 'dense' or 'chunked'")
    excludes = {"sink": "selective attention's softmax is over the penalized keys, and lexkit's sink logit is a "
                        "column of the kernel's own softmax"}

    def weights(self, state):
        return selective_weights
