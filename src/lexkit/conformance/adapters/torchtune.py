"""torchtune's ``RotaryPositionalEmbeddings`` (plain RoPE) and ``Llama3ScaledRoPE`` (Llama 3.1's
scaling), interleaved pairs (2i, 2i+1), each rotating the r dims it is built with (the rest passed
through here, as a partial-rotary model would). They cache cos/sin for every position below
``max_seq_len``; a call past it rebuilds the cache longer (``build_rope_cache``), as a user raising
``max_seq_len`` would."""

from __future__ import annotations

import torch

from ..adapter import Adapter, from_interleaved, register, to_interleaved
from ..config import RopeConfig


class _Embedding:
    def __init__(self, config: RopeConfig) -> None:
        from torchtune.models.llama3_1 import Llama3ScaledRoPE
        from torchtune.modules import RotaryPositionalEmbeddings

        self.config, r = config, config.rotary_dims
        if config.scaling == "llama3":
            self.module = Llama3ScaledRoPE(r, max_seq_len=4096, base=config.base, scale_factor=config.factor,
                                           low_freq_factor=config.low_freq or 1.0,
                                           high_freq_factor=config.high_freq or 4.0,
                                           old_context_len=config.original_len)
        else:
            self.module = RotaryPositionalEmbeddings(r, max_seq_len=4096, base=config.base)

    def _cache(self, pos: torch.Tensor) -> torch.Tensor:
        need = int(pos.max()) + 1
        if self.module.cache.shape[0] < need:
            self.module.build_rope_cache(need)
        return self.module.cache  # [N, r/2, 2]: cos, sin

    def frequencies(self, pos: torch.Tensor) -> tuple[torch.Tensor, float]:
        return self.module.theta, 1.0

    def tables(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cache = self._cache(pos)[pos]
        return cache[..., 0].to(self.config.dtype), cache[..., 1].to(self.config.dtype)

    def rotate(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        self._cache(pos)
        r = self.config.rotary_dims
        half = self.config.pairs == "half"  # torchtune holds interleaved pairs: half-split inputs converted
        inter = (to_interleaved(x, r) if half else x)[..., :r].transpose(0, 1)[None]  # [1, n, H, r]
        out = self.module(inter, input_pos=pos[None])[0].transpose(0, 1)  # [H, n, r]
        out = torch.cat((out, x[..., r:]), dim=-1)
        return from_interleaved(out, r) if half else out


@register
class Torchtune(Adapter):
    name = "torchtune"
    modules = ("torchtune.modules", "torchtune.models.llama3_1")
    extra = "conformance-torchtune"
    summary = "RotaryPositionalEmbeddings and Llama3ScaledRoPE (their theta buffers, caches and forward)"

    def supports(self, config: RopeConfig) -> str | None:
        if config.scheme != "rope":
            return f"no {config.scheme} in torchtune"
        if config.scaling not in ("none", "llama3"):
            return f"no {config.scaling} scaling in torchtune's RoPE modules"
        return None

    def build(self, config: RopeConfig) -> object:
        return _Embedding(config)
