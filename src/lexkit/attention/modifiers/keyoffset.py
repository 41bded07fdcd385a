"""The nanoGPT speedrun's partial key offset (modded-nanogpt ``train_gpt.py``, ``key_offset`` on its
long-window layers: "shift keys forward for the stationary head dims. Enables 1-layer induction"):
the last dims of every key take the previous position's values::

    k'_t[d] = k_{t-1}[d]   for d >= ⌊(1 − F)·h⌋ (the last ⌈F·h⌉ dims, F = 0.5: the speedrun's half)
    k'_0[d] = k_0[d]       (the first key keeps its own: nothing precedes it)

so, on those dims, a query matching "the token I saw before" lands on the key *after* it: the two
halves of an induction head (previous-token, then match) in one layer. The other dims and the values
are unchanged. No parameters are learned.

The speedrun applies it after its rotary transform on the dims its half-truncated RoPE leaves
stationary; lexkit applies it to the projections before the layer's position transform (place
``qkv``), which is the same wherever the shifted dims are position-free: every dim of a ``none``
layer, and under ``rope:fraction=P`` the last h − 2⌊P·h/2⌋ (so ``rope:fraction=0.5`` with
``keyoffset`` is the speedrun's pairing). On dims the scheme rotates, the shifted key is rotated at
its own position. Through a KV cache the last key of the piece before is carried, so a streamed
sequence equals one pass."""

from __future__ import annotations

import torch
from torch import Tensor

from ...core.specs import Param
from .base import Modifier


def offset_start(head_dim: int, fraction: float) -> int:
    """The first shifted dim of a head of ``head_dim``: ⌊(1 − F)·h⌋ (the speedrun's h // 2 at F = 0.5); for
    F > 0 at least the last dim is shifted."""
    return int((1.0 - fraction) * head_dim)


def offset_keys(k: Tensor, start: int, previous: Tensor | None = None) -> Tensor:
    """k [b, h, n, hd] with dims ``start:`` taken from the position before: ``previous`` [b, h, 1, hd]
    the key before the first (None: the first keeps its own) -> [b, h, n, hd]."""
    before = k[..., :1, start:] if previous is None else previous[..., start:].to(k.dtype)
    moved = torch.cat((before, k[..., :-1, start:]), dim=-2)  # [b, h, n, hd - start]
    return torch.cat((k[..., :start], moved), dim=-1)


def _fraction(value: float) -> bool:
    return 0.0 < value <= 1.0


class KeyOffset(Modifier):
    """The last dims of each key from the previous position (the speedrun's partial key offset)."""

    name = "keyoffset"
    params = {"F": Param(float, 0.5, "the fraction of each head's dims shifted: its last ⌈F·h⌉", _fraction,
                         "in (0, 1]")}
    positional = "F"
    place = "qkv"
    summary = "k_t[d] <- k_{t-1}[d] on each head's last ⌈F·h⌉ dims (F = 0.5): 1-layer induction"
    source = "the nanoGPT speedrun, modded-nanogpt train_gpt.py (key_offset)"

    def qkv(self, q: Tensor, k: Tensor, v: Tensor, state, carry: dict | None,
            x: Tensor | None = None, pos: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        start = offset_start(k.shape[-1], self.values["F"])
        out = offset_keys(k, start, None if carry is None else carry.get(self.name))
        if carry is not None:
            carry[self.name] = k[..., -1:, :].detach()
        return q, out, v
