"""LongRoPE's frequencies (Ding et al. 2024, "LongRoPE: Extending LLM Context Window Beyond 2 Million
Tokens"; Phi-3 and Phi-4's ``rope_scaling``), the float64 reference of :mod:`lexkit.conformance`.

A definition, not a scheme: LongRoPE rescales each frequency by its own searched factor, a list per
model that a spec string does not carry, so no ``rope:scaling=`` reads it. The convention is Hugging
Face transformers' ``_compute_longrope_parameters`` and its ``longrope_frequency_update`` (5.x):

* θ_i = 1 / (λ_i · base^(2i/r)), i = 0 .. r/2 - 1, r the rotary dims, with λ = ``long_factor``
  when the current length n (max position + 1 of the call) exceeds the original length L, and
  λ = ``short_factor`` otherwise; the choice is made per call (a shorter call after a longer one
  switches back to the short factors).
* a = sqrt(1 + ln s / ln L) for s > 1 (1 for s <= 1), s = ``factor`` (Phi-3 leaves it out and HF
  takes max_position_embeddings / L), unless ``attention_factor`` is given. As in the other
  scalings, a multiplies cos and sin, so logits scale by a².
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor


def check(rot_dims: int, short_factor: Sequence[float], long_factor: Sequence[float], factor: float,
          original_len: int) -> None:
    """ValueError for LongRoPE settings that cannot work: factor lists of the wrong length or not
    positive, a factor below 1, an original length below 2 (ln L is the divisor of a)."""
    for name, values in (("short_factor", short_factor), ("long_factor", long_factor)):
        if len(values) != rot_dims // 2:
            raise ValueError(f"longrope: {name} has {len(values)} values; the {rot_dims} rotary dims need "
                             f"{rot_dims // 2} (one per pair)")
        if not all(math.isfinite(x) and x > 0 for x in values):
            raise ValueError(f"longrope: every {name} value must be a finite number > 0")
    if not factor >= 1:
        raise ValueError(f"longrope: factor={factor} is out of range (must be >= 1)")
    if original_len < 2:
        raise ValueError(f"longrope: original_len={original_len} must be >= 2")


def inv_freq(rot_dims: int, base: float, short_factor: Sequence[float], long_factor: Sequence[float],
             factor: float, original_len: int, length: int,
             attention_factor: float | None = None) -> tuple[Tensor, float]:
    """(θ float64 [r/2], a) of LongRoPE for a call of current ``length`` (see the module docstring)."""
    check(rot_dims, short_factor, long_factor, factor, original_len)
    ext = torch.tensor(long_factor if length > original_len else short_factor, dtype=torch.float64)  # [r/2]
    i = torch.arange(rot_dims // 2, dtype=torch.float64)
    theta = 1.0 / (ext * base ** (2.0 * i / rot_dims))
    if attention_factor is None:
        attention_factor = math.sqrt(1 + math.log(factor) / math.log(original_len)) if factor > 1 else 1.0
    return theta, attention_factor
