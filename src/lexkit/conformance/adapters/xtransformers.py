"""x-transformers' ``RotaryEmbedding`` (interleaved pairs (2i, 2i+1)): plain RoPE, position
interpolation (``interpolation_factor``), fixed NTK-aware (``base_rescale_factor``), partial rotation
(``dim`` = r) and xPos (``use_xpos``, γ 0.4 fixed), applied with its ``apply_rotary_pos_emb``; the
query gets the xPos scale and the key its inverse, as its ``Attention`` does."""

from __future__ import annotations

import math

import torch

from ..adapter import Adapter, from_interleaved, register, to_interleaved
from ..config import RopeConfig


class _Embedding:
    def __init__(self, config: RopeConfig) -> None:
        from x_transformers.x_transformers import RotaryEmbedding, apply_rotary_pos_emb

        self.config, self.apply = config, apply_rotary_pos_emb
        xpos = config.scheme == "xpos" and config.decay
        self.module = RotaryEmbedding(
            config.rotary_dims, use_xpos=xpos, scale_base=config.scale_base, base=config.base,
            interpolation_factor=config.factor if config.scaling == "linear" else 1.0,
            base_rescale_factor=config.factor if config.scaling == "ntk" else 1.0)
        if not xpos:
            self.tables, self.rotate = self._tables, self._rotate

    def frequencies(self, pos: torch.Tensor) -> tuple[torch.Tensor, float]:
        """The angle per position it uses: inv_freq / interpolation_factor."""
        return self.module.inv_freq / self.module.interpolation_factor, 1.0

    def _tables(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs, _ = self.module(pos)  # [1, n, r], each angle twice
        angle = freqs[0, :, ::2]
        return angle.cos().to(self.config.dtype), angle.sin().to(self.config.dtype)

    def _rotate(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        freqs, scale = self.module(pos)
        r = self.config.rotary_dims
        inside, outside = _layout(self.config)
        return outside(self.apply(inside(x, r), freqs, scale), r)

    def scores(self, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        freqs, scale = self.module(pos)
        r = self.config.rotary_dims
        inside, _ = _layout(self.config)
        tq = self.apply(inside(q, r), freqs, scale)
        tk = self.apply(inside(k, r), freqs, scale ** -1)
        return tq @ tk.transpose(-1, -2) / math.sqrt(q.shape[-1])


def _layout(config):
    """(into its interleaved pairs, back): a conversion for half-split inputs, none for interleaved ones."""
    if config.pairs == "interleaved":
        return (lambda x, r: x), (lambda x, r: x)
    return to_interleaved, from_interleaved


@register
class XTransformers(Adapter):
    name = "x-transformers"
    modules = ("x_transformers",)
    extra = "conformance-x-transformers"
    summary = "RotaryEmbedding (interpolation_factor, base_rescale_factor, use_xpos) and apply_rotary_pos_emb"

    def supports(self, config: RopeConfig) -> str | None:
        if config.scheme == "rerope":
            return "no ReRoPE in x-transformers"
        if config.scaling not in ("none", "linear", "ntk"):
            return f"no {config.scaling} scaling in x-transformers' RotaryEmbedding"
        if config.scheme == "xpos" and config.gamma != 0.4:
            return "x-transformers' xPos fixes γ = 0.4"
        return None

    def build(self, config: RopeConfig) -> object:
        return _Embedding(config)
