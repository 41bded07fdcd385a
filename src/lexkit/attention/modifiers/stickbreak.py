"""Stick-breaking attention (Tan et al., ICLR 2025, "Scaling Stick-Breaking Attention", arXiv
2410.17980; reference shawntan/stickbreaking-attention, the model in IBM's dolomite-engine
``SBAttention``): each key, from the nearest back, takes a share β of what the keys after it left:

    β_ij = sigmoid(z_ij),    z_ij = q_i·k_j/√d (the layer's whole score: scheme, temperature, cap)
    A_ij = β_ij · ∏_{j<k<i} (1 − β_ik)
    o_i = Σ_j A_ij v_j + (1 − Σ_j A_ij)·b_h,    then a GroupNorm per head

so the most recent strong match wins and order needs no position encoding. Computed in log space
(:func:`stick_breaking`): log A_ij = log σ(z_ij) + Σ_{j<k<i} log σ(−z_ik), with log σ(−z) =
−softplus(z), the sum over the keys after j as a reversed cumulative sum over the block's keys.

Choices, each the reference's:

* **Not the query's own key** (the kernel's ``attend_current=False``, which the reference model
  uses; its decoding path drops the current key): key j counts for query i when j < i.
  ``stickbreak:current=true`` lets the query break the stick first at its own key (j <= i).
* **The leftover** 1 − Σ_j A_ij (= ∏ of every visible key's 1 − β) goes to a learned vector b_h per
  head (the model's ``head_bias``, zero at initialization): the head can attend to nothing. Its
  first query, with no key before it, outputs b_h.
* **A GroupNorm per head** over the head's d channels (ε = 1e-5, a gain and bias per channel, as the
  model's ``GroupNorm(heads, d_model)``), before the output projection; ``norm=false`` drops it.

A pattern is a mask: a key it hides takes no share and breaks nothing (its 1 − β is 1), so under
``window:W`` a query splits the stick over its last W keys only. Every visible key of a query lies
between its first visible key and itself, all in the query's block, so the chunked kernel and the
KV cache compute the same products as one dense block (:meth:`Modifier.weights`). Compiled
FlexAttention cannot: its ``score_mod`` sees one score at a time and normalizes by a softmax.

The remainder reaches :meth:`StickBreaking.finish` without a second kernel: :meth:`StickBreaking.prepare`
appends a channel of ones to the values, whose output is Σ_j A_ij. Learned state: ``blocks.i.stickbreak``
(``bias`` [H, d], ``norm``)."""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...core.specs import Param
from .base import Modifier, Shape


def stick_breaking(scores: Tensor, visible: Tensor, q_idx: Tensor, k_idx: Tensor, current: bool = False,
                   carry: dict | None = None) -> Tensor:
    """A_ij = σ(z_ij)·∏_{j<k<i} (1 − σ(z_ik)) over the keys each query counts, in log space.

    scores z [b, h, n_q, n_k] (any value where not visible), visible [n_q, n_k], q_idx [n_q], k_idx
    [n_k] ascending -> weights [b, h, n_q, n_k] in float32, 0 where a key does not count, each row
    summing to at most 1. A key counts when visible and before its query (or the query itself with
    ``current``). ``carry`` is unused: every key a query counts is in its block."""
    counts = visible & ((k_idx[None, :] <= q_idx[:, None]) if current else (k_idx[None, :] < q_idx[:, None]))
    z = scores.float().masked_fill(~counts, 0.0)
    log_beta = F.logsigmoid(z)  # log β_ij
    log_rest = (-F.softplus(z)).masked_fill(~counts, 0.0)  # log(1 − β_ik); 0: a key that does not count breaks nothing
    suffix = log_rest.flip(-1).cumsum(-1).flip(-1)  # Σ over keys k >= j
    after = torch.cat((suffix[..., 1:], torch.zeros_like(suffix[..., :1])), dim=-1)  # Σ over keys k > j
    return (log_beta + after).masked_fill(~counts, float("-inf")).exp()


class StickBreakingState(nn.Module):
    """The leftover's vector per head and the GroupNorm per head (None with ``norm=false``)."""

    def __init__(self, n_heads: int, head_dim: int, norm: bool) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(n_heads, head_dim))
        self.norm = nn.GroupNorm(n_heads, n_heads * head_dim, eps=1e-5) if norm else None


class StickBreaking(Modifier):
    """Stick-breaking attention in place of the softmax (Tan et al. 2025)."""

    name = "stickbreak"
    params = {
        "current": Param(bool, False, "the query's own key takes a share too (the kernel's attend_current)"),
        "norm": Param(bool, True, "a GroupNorm per head on the output (the reference model's)"),
    }
    place = "attention"
    group = "attention"
    summary = "A_ij = σ(z_ij)·∏_{j<k<i}(1 − σ(z_ik)), the leftover to a learned vector, GroupNorm per head"
    source = "Tan et al., ICLR 2025, arXiv 2410.17980 (shawntan/stickbreaking-attention; dolomite SBAttention)"
    slot = "stickbreak"
    flex_refusal = ("kernel 'flex' cannot run stick-breaking attention (a running product over the keys in "
                    "place of a softmax); use 'dense' or 'chunked'")
    excludes = {"sink": "stick-breaking leaves its own leftover (to a learned vector per head), and a sink logit "
                        "is a column of a softmax it does not have"}

    def state(self, shape: Shape) -> StickBreakingState:
        return StickBreakingState(shape.n_heads, shape.head_dim, self.values["norm"])

    def prepare(self, q: Tensor, k: Tensor, v: Tensor, state) -> tuple[Tensor, Tensor, Tensor]:
        return q, k, torch.cat((v, v.new_ones(*v.shape[:-1], 1)), dim=-1)  # [b, h, n, d + 1]: the mass channel

    def weights(self, state):
        return partial(stick_breaking, current=self.values["current"])

    def finish(self, y: Tensor, x: Tensor, state: StickBreakingState) -> Tensor:
        out, mass = y.split((y.shape[-1] - 1, 1), dim=-1)  # [b, h, n, d], [b, h, n, 1]: Σ_j A_ij v_j and Σ_j A_ij
        out = out + (1.0 - mass) * state.bias[:, None, :].to(out.dtype)
        if state.norm is None:
            return out
        b, h, n, d = out.shape
        flat = state.norm(out.transpose(1, 2).reshape(b * n, h * d))  # GroupNorm(heads, d_model)
        return flat.view(b, n, h, d).transpose(1, 2)  # [b, h, n, d]
