"""Token shift (x-transformers' ``ShiftTokens`` with shifts (0, 1); RWKV's time mix): at the
normalized input of the attention and of the feed-forward block, the last ``floor(F·d)`` features of
each position are replaced by those of the position before (zeros before the first):

    a'_m = [a_m[: d - w], a_{m-1}[d - w :]],    w = floor(F·d)

so a layer sees a pair of positions at once; ``shift`` alone is F = 0.5 (x-transformers'
``shift_tokens=1``). Through a KV cache the last position of the piece before is carried per part.
A width that would shift no feature (floor(F·d) = 0) is refused, naming the width."""

from __future__ import annotations

import torch
from torch import Tensor

from ...core.specs import Param
from .base import Modifier, Shape

#: the fraction ``+shift`` alone shifts (x-transformers' ``shift_tokens=1``: half the features)
DEFAULT_SHIFT = 0.5


def token_shift(h: Tensor, width: int, previous: Tensor | None = None) -> Tensor:
    """h [b, n, d] with its last ``width`` features at each position replaced by those of the
    position before: zeros before the first, or ``previous`` [b, 1, width] (the last position of
    the piece before, through a KV cache)."""
    keep, move = h.split((h.shape[-1] - width, width), dim=-1)  # [b, n, d - width], [b, n, width]
    before = h.new_zeros(h.shape[0], 1, width) if previous is None else previous.to(h.dtype)
    # split and cat, not slices: their backward narrows the gradient instead of zero-filling h's shape
    kept = move.split((move.shape[1] - 1, 1), dim=1)[0]  # [b, n - 1, width]: every position but the last
    shifted = torch.cat((before, kept), dim=1)  # [b, n, width]
    return torch.cat((keep, shifted), dim=-1)


def shift_width(fraction: float, d_model: int) -> int:
    """floor(F·d): how many features a shift of ``fraction`` moves at width ``d_model``."""
    return int(d_model * fraction)


def check_width(fraction: float, d_model: int, what: str) -> None:
    """ValueError when a shift of ``fraction`` moves no feature at width ``d_model``."""
    if fraction and shift_width(fraction, d_model) == 0:
        raise ValueError(f"{what} {fraction:g} shifts floor({fraction:g} x {d_model}) = 0 features at width "
                         f"{d_model}: give at least {1 / d_model:.3g} (one feature)")


class Shift(Modifier):
    """Token shift of a fraction F of the features (x-transformers' ShiftTokens)."""

    name = "shift"
    params = {"F": Param(float, DEFAULT_SHIFT, "the fraction of features taken from the position before",
                         lambda x: 0 < x < 1, "in (0, 1)")}
    positional = "F"
    place = "inputs"
    summary = "the previous position's last F·d features at every block's input (x-transformers)"
    source = "x-transformers ShiftTokens; Peng et al. 2023, RWKV (time mix)"

    def check(self, shape: Shape) -> None:
        check_width(self.values["F"], shape.d_model, "+shift:")

    def inputs(self, h: Tensor, state, part: str, carry: dict | None) -> Tensor:
        width = shift_width(self.values["F"], h.shape[-1])
        key = (self.name, part)
        out = token_shift(h, width, None if carry is None else carry.get(key))
        if carry is not None:
            carry[key] = h[:, -1:, -width:].detach()
        return out
