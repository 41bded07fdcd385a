"""litgpt's rope cache: ``build_rope_cache`` (plain RoPE; ``extra_config`` with a factor alone:
linear; with low/high factors: Llama 3; with β_fast/β_slow: YaRN, its attention factor from
``mscale``/``mscale_all_dim`` only, which these configs do not carry) and ``apply_rope``, pairs
(i, i + r/2). The cache covers positions 0 .. max + 1 of each call."""

from __future__ import annotations

import torch

from ..adapter import Adapter, register
from ..config import YARN_EXTRA, RopeConfig


def extra_config(c: RopeConfig) -> dict | None:
    """litgpt's ``rope_adjustments`` of a config (as its ``Config`` passes them on)."""
    if c.scaling == "none":
        return None
    if c.scaling == "linear":
        return {"factor": c.factor}
    if c.scaling == "llama3":
        return {"factor": c.factor, "low_freq_factor": c.low_freq or 1.0, "high_freq_factor": c.high_freq or 4.0,
                "original_max_seq_len": c.original_len}
    return {"factor": c.factor, "beta_fast": c.beta_fast or 32.0, "beta_slow": c.beta_slow or 1.0,
            "original_max_seq_len": c.original_len}


class _Embedding:
    def __init__(self, config: RopeConfig) -> None:
        from litgpt.model import apply_rope, build_rope_cache

        self.config, self.build, self.apply = config, build_rope_cache, apply_rope
        self.extra = extra_config(config)
        self.cache: tuple[torch.Tensor, torch.Tensor] | None = None

    def _tables(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        need = int(pos.max()) + 1
        if self.cache is None or self.cache[0].shape[0] < need:
            self.cache = self.build(need, self.config.rotary_dims, base=self.config.base, extra_config=self.extra)
        return self.cache[0][pos], self.cache[1][pos]  # [n, r]

    def tables(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self._tables(pos)
        half = self.config.rotary_dims // 2
        return cos[:, :half].to(self.config.dtype), sin[:, :half].to(self.config.dtype)

    def rotate(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        cos, sin = self._tables(pos)
        r = self.config.rotary_dims
        rot = self.apply(x[None, ..., :r], cos[None].to(x.dtype), sin[None].to(x.dtype))[0]
        return torch.cat((rot, x[..., r:]), dim=-1)


@register
class Litgpt(Adapter):
    name = "litgpt"
    modules = ("litgpt.model",)
    extra = "conformance-litgpt"
    summary = "build_rope_cache (extra_config: linear, llama3, yarn) and apply_rope"

    def supports(self, config: RopeConfig) -> str | None:
        if config.pairs != "half":
            return "litgpt's apply_rope rotates half-split pairs (i, i + r/2) only"
        if config.scheme != "rope":
            return f"no {config.scheme} in litgpt"
        if config.scaling not in ("none", "linear", "llama3", "yarn"):
            return f"no {config.scaling} scaling in litgpt's build_rope_cache"
        if config.scaling == "yarn" and not _has_yarn():
            return f"litgpt {self.version()} has no YaRN in build_rope_cache (0.5.13 has)"
        given = [k for k in YARN_EXTRA if getattr(config, k) is not None]
        if given:
            return f"the adapter maps litgpt's YaRN factor, β and length only, not {', '.join(given)}"
        return None

    def build(self, config: RopeConfig) -> object:
        return _Embedding(config)


def _has_yarn() -> bool:
    """Whether the installed litgpt's ``build_rope_cache`` reads a YaRN ``extra_config`` (0.5.9 did not:
    every YaRN case was an error there, not an n/a)."""
    import inspect

    from litgpt.model import build_rope_cache

    return "beta_fast" in inspect.getsource(build_rope_cache)
