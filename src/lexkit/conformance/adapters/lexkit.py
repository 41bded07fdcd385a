"""lexkit's own schemes under the suite: the spec of a config built by :func:`lexkit.positions.create`
and run through the code a model runs (``Rotary.frequencies`` and ``transform_qk`` with their float64
angles cast once, ``Scheme.scores``), against the reference composed from the same definitions.
What this shows is lexkit's plumbing (partial rotation, dtype casts, caches, the dynamic length, the
xPos centring), not its formulas, which are the reference."""

from __future__ import annotations

import torch

from ... import positions
from ...core.version import __version__
from ..adapter import Adapter, register
from ..config import RopeConfig
from ..reference import spec


class _Embedding:
    def __init__(self, config: RopeConfig) -> None:
        self.config = config
        self.scheme = positions.create(spec(config), n_heads=1, head_dim=config.head_dim)
        if config.scheme != "rerope":
            self.frequencies = lambda pos: self.scheme.frequencies(pos, pos)
        if config.scheme == "rope" or (config.scheme == "xpos" and not config.decay):
            self.tables, self.rotate = self._tables, self._rotate

    def _rotate(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        return self.scheme.transform_qk(x[None], x[None], pos, pos)[0][0]

    def _tables(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Read off the rotation of x = (1, .., 1, 0, .., 0): pair i becomes (a·cos, a·sin)."""
        r = self.config.rotary_dims
        x = torch.zeros(1, pos.numel(), self.config.head_dim, dtype=self.config.dtype)
        x[..., : r // 2] = 1
        out = self._rotate(x, pos)[0]
        return out[:, : r // 2], out[:, r // 2 : r]

    def scores(self, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        return self.scheme.scores(q[None], k[None], pos, pos)[0]


@register
class Lexkit(Adapter):
    name = "lexkit"
    summary = "positions.create(spec): Rotary.frequencies, transform_qk, Scheme.scores (ReRoPE, xPos)"

    def version(self) -> str:
        return __version__

    def supports(self, config: RopeConfig) -> str | None:
        if config.pairs != "half":
            return "lexkit rotates half-split pairs (i, i + r/2) only"
        if config.scaling == "longrope":
            return "no LongRoPE scheme in lexkit (positions/longrope.py is the reference's definition)"
        if config.head_dim % 2 and config.scheme != "rope":
            return f"lexkit's {config.scheme} needs an even head dim"
        return None

    def build(self, config: RopeConfig) -> object:
        return _Embedding(config)
