"""Tolerances by dtype: how far a correct implementation may be from the float64 reference.

A correct implementation may compute in float32 (every runtime measured does: θ, p·θ and cos/sin),
so below float64 the budget is float32's unit roundoff u = 2^-24 for the arithmetic and the table
dtype's own for the final rounding (u_D: bfloat16 2^-8, float16 2^-11, float32 2^-24). A float64 case
asks for float64 arithmetic throughout (u = u_D = 2^-53). Every bound carries a margin C = 4.

* θ_i, relative: C·u·(2 + |ln θ_i|) (θ = base^(-2i/r) through exp of a rounded exponent: an error
  of u·|ln θ| in the exponent is that relative error in θ). The attention factor a: C·u.
* cos/sin at position p, absolute: a·(2·u_D + C·u·(1 + |p·θ_i|·(2 + |ln θ_i|))) (the angle p·θ_i
  carries θ's relative error and two roundings; cos and sin move by at most the angle's error).
  So at p = 1,048,576 a float32 angle of the highest frequency may be off by ~0.25 rad while the
  low frequencies, the ones every scaling changes, stay within ~1e-3: scaling bugs show, float32
  arithmetic does not fail. ``rope/float64-angles-past-1M`` asks for float64 arithmetic instead.
* rotated x: (|x_i| + |x_{i+r/2}|)·(the table's bound + 2·a·u_D); unrotated dims u_D·|x|.
* scores q·k/√h: Σ_j |q_j||k_j| / √h times the largest gain of a term (a², xPos's decay) times
  (4·u_D + 2·max_i of the angle's bound above at the farther position).

The planted bugs of ``tests/test_conformance.py`` miss these bounds by factors of 10^2 to 10^7.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

C = 4.0  # margin
UNIT_ROUNDOFF = {torch.float64: 2.0**-53, torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}


def unit(dtype: torch.dtype) -> float:
    """u_D of a table dtype."""
    if dtype not in UNIT_ROUNDOFF:
        raise ValueError(f"dtype {dtype}: valid: {', '.join(str(d) for d in UNIT_ROUNDOFF)}")
    return UNIT_ROUNDOFF[dtype]


def arithmetic(dtype: torch.dtype) -> float:
    """u of the arithmetic a correct implementation may use for tables of ``dtype``."""
    return UNIT_ROUNDOFF[torch.float64] if dtype == torch.float64 else UNIT_ROUNDOFF[torch.float32]


def frequencies(theta: Tensor, dtype: torch.dtype) -> Tensor:
    """Relative bound per θ_i [r/2]."""
    return C * arithmetic(dtype) * (2 + theta.abs().log().abs())


def attention_factor(dtype: torch.dtype) -> float:
    """Relative bound of a."""
    return C * arithmetic(dtype)


def angle(pos: Tensor, theta: Tensor, dtype: torch.dtype) -> Tensor:
    """Absolute bound of cos/sin(p·θ_i) from the arithmetic, [n, r/2] (before a and the final rounding)."""
    p = pos.to(torch.float64).abs()[:, None]
    return C * arithmetic(dtype) * (1 + p * theta * (2 + theta.log().abs()))


def tables(pos: Tensor, theta: Tensor, a: float, dtype: torch.dtype) -> Tensor:
    """Absolute bound of a·cos and a·sin, [n, r/2]."""
    return a * (2 * unit(dtype) + angle(pos, theta, dtype))


def rotate(x: Tensor, pos: Tensor, theta: Tensor, a: float, rot_dims: int, dtype: torch.dtype) -> Tensor:
    """Absolute bound per element of the rotated x [H, n, h]."""
    x = x.to(torch.float64).abs()
    half = rot_dims // 2
    pair = x[..., :half] + x[..., half:rot_dims]  # [H, n, r/2]
    t = (tables(pos, theta, a, dtype) + 2 * a * unit(dtype)) * pair
    return torch.cat((t, t, unit(dtype) * x[..., rot_dims:]), dim=-1)


def scores(q: Tensor, k: Tensor, pos: Tensor, theta: Tensor, gain: Tensor, dtype: torch.dtype) -> Tensor:
    """Absolute bound per score [H, n, n]."""
    mag = q.to(torch.float64).abs() @ k.to(torch.float64).abs().transpose(-1, -2) / math.sqrt(q.shape[-1])
    per_pos = angle(pos, theta, dtype).amax(-1)  # [n]
    far = torch.maximum(per_pos[:, None], per_pos[None, :])
    return mag * gain * (4 * unit(dtype) + 2 * far)
