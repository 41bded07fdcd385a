"""Hugging Face transformers: the rotary embedding a model builds from its config, as a user gets it.

A config becomes ``rope_parameters`` (``rope_type``, ``rope_theta``, ``factor``,
``original_max_position_embeddings``, the method's own keys, ``partial_rotary_factor``) of a
``GPTNeoXConfig`` (the model partial rotation comes from; every ``ROPE_INIT_FUNCTIONS`` type but
LongRoPE), of a ``Phi3Config`` for LongRoPE (Phi-3's rotary class, its switch included), or, for a
hybrid model, per-layer-type ``rope_parameters`` of its own model's config (``Gemma3TextConfig`` and
``Gemma3RotaryEmbedding`` for Gemma 3; ``Olmo3Config`` for OLMo 3 and any other, whose sliding layers
must keep their own RoPE). The config is validated as
transformers validates it (its warnings are silenced: a warning is not a refusal). Each call runs the
rotary module's forward, so its ``dynamic_rope_update`` sees the calls in order; the frequencies are
the module's ``inv_freq`` buffer and ``attention_scaling`` after the call, the tables its cos/sin,
and rotate its ``apply_rotary_pos_emb``. Dynamic NTK reads ``max_position_embeddings`` as L (HF's
convention); the other methods read ``original_max_position_embeddings``, with
``max_position_embeddings`` = s·L.
"""

from __future__ import annotations

import contextlib

import torch

from ...positions.scaling import HF_KEYS, hf_rope_type
from ..adapter import Adapter, register
from ..config import YARN_KEYS, RopeConfig


@contextlib.contextmanager
def _quiet():
    from transformers.utils import logging

    old = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(old)


def rope_parameters(c: RopeConfig) -> dict:
    """HF's ``rope_parameters`` of one layer's config (keys by :data:`lexkit.positions.scaling.HF_KEYS`)."""
    ours: dict = {"base": c.base}
    if c.factor is not None:
        ours["factor"] = c.factor
    if c.scaling in ("yarn", "llama3", "longrope"):
        ours["original_len"] = c.original_len
    if c.scaling == "yarn":
        ours.update({k: getattr(c, k) for k in YARN_KEYS if getattr(c, k) is not None})
    if c.scaling == "llama3":  # required keys in HF
        ours.update(low_freq=c.low_freq or 1.0, high_freq=c.high_freq or 4.0)
    if c.scaling == "longrope":
        ours.update(short_factor=list(c.short_factor), long_factor=list(c.long_factor))
    if c.fraction != 1.0:
        ours["fraction"] = c.fraction
    return {"rope_type": hf_rope_type(c.scaling)} | {HF_KEYS[k]: v for k, v in ours.items()}


def max_positions(c: RopeConfig) -> int:
    if c.scaling == "dynamic":
        return c.original_len
    if c.scaling in ("yarn", "llama3", "longrope"):
        return int(c.original_len * (c.factor or 1.0))
    return 4096


class _Embedding:
    def __init__(self, config: RopeConfig) -> None:
        self.config = config
        with _quiet():
            if config.layers and config.model == "gemma3":  # Gemma 3's own class and config
                from transformers import Gemma3TextConfig
                from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding, apply_rotary_pos_emb

                types = [name for name, _ in config.layers]
                cfg = Gemma3TextConfig(hidden_size=config.head_dim, head_dim=config.head_dim, num_attention_heads=1,
                                       num_key_value_heads=1, num_hidden_layers=len(types), layer_types=types,
                                       max_position_embeddings=max(max_positions(c) for _, c in config.layers),
                                       rope_parameters={name: rope_parameters(c) for name, c in config.layers})
                self.module, self.layer_type = Gemma3RotaryEmbedding(cfg), config.layer_type
            elif config.layers:  # OLMo 3's (a hybrid of another model: the same per-layer-type machinery)
                from transformers import Olmo3Config
                from transformers.models.olmo3.modeling_olmo3 import Olmo3RotaryEmbedding, apply_rotary_pos_emb

                types = [name for name, _ in config.layers]
                cfg = Olmo3Config(hidden_size=config.head_dim, num_attention_heads=1, num_key_value_heads=1,
                                  num_hidden_layers=len(types), layer_types=types,
                                  max_position_embeddings=max(max_positions(c) for _, c in config.layers),
                                  rope_parameters={name: rope_parameters(c) for name, c in config.layers})
                self.module, self.layer_type = Olmo3RotaryEmbedding(cfg), config.layer_type
            elif config.scaling == "longrope":  # Phi-3's rotary class: longrope and its switch
                from transformers import Phi3Config
                from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding, apply_rotary_pos_emb

                cfg = Phi3Config(hidden_size=config.head_dim, num_attention_heads=1, num_key_value_heads=1,
                                 num_hidden_layers=1, max_position_embeddings=max_positions(config),
                                 original_max_position_embeddings=config.original_len,
                                 rope_parameters=rope_parameters(config))
                self.module, self.layer_type = Phi3RotaryEmbedding(cfg), None
            else:  # GPT-NeoX's: partial rotation (partial_rotary_factor), every other rope_type
                from transformers import GPTNeoXConfig
                from transformers.models.gpt_neox.modeling_gpt_neox import (
                    GPTNeoXRotaryEmbedding,
                    apply_rotary_pos_emb,
                )

                params = {"partial_rotary_factor": config.fraction, **rope_parameters(config)}
                cfg = GPTNeoXConfig(hidden_size=config.head_dim, num_attention_heads=1, num_hidden_layers=1,
                                    max_position_embeddings=max_positions(config), rope_parameters=params,
                                    rotary_pct=config.fraction)  # releases before 5.x's rope_parameters read it
                self.module, self.layer_type = GPTNeoXRotaryEmbedding(cfg), None
        self.apply = apply_rotary_pos_emb

    def _forward(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [B, n, r] of the module's forward at ``pos`` [n] (B = 1) or [B, n] (a batch)."""
        x = torch.zeros(1, dtype=self.config.dtype)
        args = (self.layer_type,) if self.layer_type else ()
        with torch.no_grad():
            return self.module(x, pos if pos.dim() == 2 else pos[None], *args)

    def frequencies(self, pos: torch.Tensor) -> tuple[torch.Tensor, float]:
        self._forward(pos)
        prefix = f"{self.layer_type}_" if self.layer_type else ""
        return getattr(self.module, f"{prefix}inv_freq"), getattr(self.module, f"{prefix}attention_scaling")

    def tables(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self._forward(pos)
        half = cos.shape[-1] // 2
        return cos[0, :, :half], sin[0, :, :half]

    def rotate(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        cos, sin = self._forward(pos)
        r = cos.shape[-1]
        rot, _ = self.apply(x[None, ..., :r], x[None, ..., :r], cos.to(x.dtype), sin.to(x.dtype))
        return torch.cat((rot[0], x[..., r:]), dim=-1)

    def rotate_batch(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """x [B, H, n, h] at position_ids [B, n] in one forward, as a batched model calls it."""
        cos, sin = self._forward(pos)  # [B, n, r]
        r = cos.shape[-1]
        rot, _ = self.apply(x[..., :r], x[..., :r], cos.to(x.dtype), sin.to(x.dtype))  # unsqueezes the heads
        return torch.cat((rot, x[..., r:]), dim=-1)


@register
class Transformers(Adapter):
    name = "transformers"
    modules = ("transformers",)
    extra = "conformance-transformers"
    summary = ("GPTNeoX/Phi3/Olmo3/Gemma3RotaryEmbedding (per layer type) from rope_parameters, with their "
               "dynamic_rope_update; apply_rotary_pos_emb")

    def unavailable(self) -> str | None:
        reason = super().unavailable()
        if reason is None and int(self.version().split(".")[0]) < 5:
            return f"transformers {self.version()}: the adapter needs >= 5 (rope_parameters)"
        return reason

    def supports(self, config: RopeConfig) -> str | None:
        if config.pairs != "half":
            return "transformers' apply_rotary_pos_emb rotates half-split pairs (i, i + r/2) only"
        if config.scheme != "rope":
            return f"no {config.scheme} in transformers"
        if config.scaling == "ntk":
            return "no fixed NTK-aware scaling in transformers (only dynamic)"
        return None

    def build(self, config: RopeConfig) -> object:
        return _Embedding(config)
