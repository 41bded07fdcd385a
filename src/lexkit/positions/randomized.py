"""Randomized positions (Ruoss et al. 2023, "Randomized Positional Encodings Boost Length
Generalization of Transformers", ACL 2023; google-deepmind/randomized_positional_encodings).

In training, the n positions of an input are a sorted random subset of [0, L_max), drawn
uniformly among the subsets of size n (without replacement), L_max much larger than n; at
evaluation they are 0 .. n-1. A model trained so has met every position and distance below L_max,
so an input up to L_max tokens long is in the distribution its position encoding was trained on.
A training option of any scheme: ``ModelConfig.random_positions`` (``lexkit train
--random-positions L_MAX``), recorded in the run's config.json. One subset per batch, shared by
its rows, as the reference code draws it (``noisy_fixed_positional_encodings``).
"""

from __future__ import annotations

import torch
from torch import Tensor


def sample(n: int, max_len: int, generator: torch.Generator | None = None) -> Tensor:
    """n sorted distinct positions drawn uniformly from [0, max_len): int64 [n] on the CPU."""
    if not 0 < n <= max_len:
        raise ValueError(f"randomized positions: {n} positions cannot be drawn from [0, {max_len})")
    return torch.randperm(max_len, generator=generator)[:n].sort().values


def check(max_len: int | None, train_len: int) -> None:
    """ValueError unless ``max_len`` (None: off) is at least the training length."""
    if max_len is not None and max_len < train_len:
        raise ValueError(f"random_positions={max_len} is below the training length {train_len}: training draws "
                         f"{train_len} distinct positions from [0, random_positions), so it must be at least "
                         f"{train_len} (Ruoss et al. use 10x or more)")


def label(scheme: str, max_len: int | None) -> str:
    """How runs and tables name a scheme trained with randomized positions: ``rope`` or
    ``rope+random<4096``."""
    return scheme if max_len is None else f"{scheme}+random<{max_len}"
