"""DroPE's fitted temperature (Gelberg, Eguchi, Akiba, Cetin 2025, "Extending the Context of
Pretrained LLMs by Dropping Their Positional Embeddings", arXiv 2512.12167): past the training
length L, a factor on every score that grows with the log of how far past it the query is::

    β_m = 1 + c·ln(n / L)  for n > L,    β_m = 1 inside the training length,    n = m + 1

c = 0.41 is the paper's fit for a model trained from scratch (``fitted:c=C`` sets it). ``fitted:c=0.2``
is the nanoGPT speedrun's window temperature (modded-nanogpt ``train_gpt.py``, ``Yarn.apply``:
``attn_scale *= 0.2·ln(new_window / old_window) + 1``), read per query the same way. The paper
writes β from the extension factor s = n / L of the evaluated context; here n is the count of keys
a causal query m sees, m + 1 (as in ``logn``), so the factor is per query: the last query of a
sequence of n tokens gets the paper's β, a query never depends on how many tokens follow it, and a
KV cache streams it exactly. (This per-query reading is lexkit's; it is not checked against the
authors' code.) β = 1 for every position seen in training, so a model is unchanged inside its
training length. L is pinned to the training length in the spec (``fitted:c=0.41,L=128``), as
``logn``'s is. Group ``temperature``, on a global layer.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ...core.specs import Param, positive
from .temperature import Temperature


def fitted_scale(pos: Tensor, c: float, train_len: int) -> Tensor:
    """β_m = 1 + c·max(0, ln((m + 1)/L)) per query, pos: [n] integer -> float32 [n]."""
    n = pos.to(torch.float64).clamp_min(0) + 1.0
    return (1.0 + c * torch.log(n / train_len).clamp_min(0.0)).to(torch.float32)


class Fitted(Temperature):
    """β = 1 + c ln(n/L) past the training length (DroPE's fitted temperature)."""

    name = "fitted"
    params = {
        "c": Param(float, 0.41, "c, the slope in ln(n/L) (DroPE's fit from scratch: 0.41)", positive, "> 0"),
        "L": Param(int, None, "L, the training length it is 1 within (default: the model's)", positive, "> 0"),
    }
    train_len_params = ("L",)
    summary = "1 + c·ln(n/L) for n = m+1 > L, else 1: DroPE's fitted temperature"
    source = "Gelberg et al. 2025, arXiv 2512.12167 (DroPE); c=0.2: the nanoGPT speedrun's window scale"

    def query_scale(self, state, pos: Tensor) -> Tensor:
        return fitted_scale(pos, float(self.values["c"]), self.values["L"])  # [n]

    def inert_at(self, n: int) -> str | None:
        """β_m = 1 for m + 1 <= L: every query of n <= L positions."""
        length = self.values["L"]
        return f"its factor is 1 at every position up to L = {length}" if length is not None and n <= length else None
