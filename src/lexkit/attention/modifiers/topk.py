"""Top-k attention: each query keeps the K largest of its visible scores and the softmax runs over
those alone (hard-sparse attention, trained and used at inference: Xiu et al. 2025, arXiv 2512.03494;
x-transformers' ``sparse_topk_attn``, the oracle of tests/test_topk.py)::

    τ_i = the K-th largest z_ij over the keys j visible to query i (all of them when fewer than K)
    A_ij = softmax_j(z_ij if z_ij >= τ_i and j visible, else -inf)

where z is the layer's whole score (scheme, temperature, cap). When the mass of a global head is
diluted over many matching keys at length (docs/hunt.md's ``python`` needles: the top key still
right, its share falling from 79-93 % to 55-57 % at 16x), a hard top-k keeps the share of the best K
whatever the length.

Choices, each x-transformers':

* **Ties at the K-th score are all kept** (``z >= τ``): deterministic, and a row keeps more than K
  keys only when scores tie exactly there.
* **Straight-through** (``topk:K,straight=true``; x-transformers' ``sparse_topk_straight_through``,
  arXiv 2505.22074): the forward is the top-k softmax, the gradient the dense softmax's over every
  visible key, so a key outside the top K still learns to rise into it.

The top K of a query are taken among every key it may see, so it needs the whole row at once: the
dense kernel (as one block), the chunked kernel and the KV cache run it exactly, each query's
visible keys in its block (:meth:`Modifier.weights`); compiled FlexAttention, whose ``score_mod``
sees one score at a time, cannot, and says so. Under ``window:W`` the top K are those of the window.
It replaces the softmax (group ``attention``: not beside ``diff`` or ``stickbreak``) and has no sink
column to join."""

from __future__ import annotations

from functools import partial

import torch
from torch import Tensor

from ...core.specs import Param, positive
from .base import Modifier


def top_k_weights(scores: Tensor, visible: Tensor, q_idx: Tensor, k_idx: Tensor, k: int,
                  straight: bool = False, carry: dict | None = None) -> Tensor:
    """The top-k softmax of each query's row: scores [b, h, n_q, n_k] (-inf where not visible),
    visible [n_q, n_k] -> weights [b, h, n_q, n_k] in float32, zero outside each row's K largest
    visible scores (ties at the K-th all kept). ``straight``: the dense softmax's gradient
    (forward unchanged). ``q_idx``/``k_idx`` are the block's indices, ``carry`` unused (:meth:`Modifier.weights`)."""
    z = scores.float().masked_fill(~visible, float("-inf"))
    top = min(int(k), z.shape[-1])
    threshold = z.topk(top, dim=-1).values[..., -1:]  # [b, h, n_q, 1]: -inf when fewer than K are visible
    keep = (z >= threshold) & visible
    sparse = torch.softmax(z.masked_fill(~keep, float("-inf")), dim=-1)
    if not straight:
        return sparse
    dense = torch.softmax(z, dim=-1)
    return sparse.detach() + dense - dense.detach()


class TopK(Modifier):
    """Each query's softmax over its K largest visible scores (Xiu et al. 2025; x-transformers)."""

    name = "topk"
    params = {
        "K": Param(int, 8, "keys each query keeps: its K largest visible scores", positive, "> 0"),
        "straight": Param(bool, False, "straight-through: the forward top-k, the gradient the dense softmax's"),
    }
    positional = "K"
    place = "attention"
    group = "attention"
    summary = "softmax over each query's K largest visible scores (ties kept), the rest 0"
    source = "Xiu et al. 2025, arXiv 2512.03494; x-transformers sparse_topk_attn (straight-through: arXiv 2505.22074)"
    flex_refusal = ("kernel 'flex' cannot run top-k attention (it needs each query's whole row of scores); use "
                    "'dense' or 'chunked'")
    excludes = {"sink": "top-k replaces the softmax over keys, and a sink logit is a column of a softmax it does not "
                        "have"}

    def weights(self, state):
        return partial(top_k_weights, k=self.values["K"], straight=self.values["straight"])

    def inert_at(self, n: int) -> str | None:
        """A query sees at most n keys: K >= n keeps all of them (the plain softmax, forward and gradient)."""
        k = self.values["K"]
        return f"K = {k} keeps every one of the at most {n} keys a query sees" if k >= n else None
