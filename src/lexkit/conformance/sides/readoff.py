"""A runtime's cos/sin tables read off its rotation, for a side whose runtime keeps them inside a
fused op: x = (1, .., 1, 0, .., 0) over the first of each pair's dims, rotated at ``pos``, gives pair
i as (a·cos, a·sin) (a: the attention factor the runtime folds into its tables). Plain numpy."""

from __future__ import annotations

import numpy as np


def tables(rotate, pos: np.ndarray, head_dim: int, rot_dims: int, interleaved: bool):
    """(a·cos, a·sin), each [n, r/2], from ``rotate(x [1, n, h], pos) -> [1, n, h]``."""
    first = slice(0, rot_dims, 2) if interleaved else slice(0, rot_dims // 2)
    second = slice(1, rot_dims, 2) if interleaved else slice(rot_dims // 2, rot_dims)
    unit = np.zeros((1, pos.size, head_dim))
    unit[..., first] = 1.0
    y = rotate(unit, pos)[0]
    return y[:, first], y[:, second]
