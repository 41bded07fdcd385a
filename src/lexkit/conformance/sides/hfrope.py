"""A config of the protocol (:mod:`protocol`: a :class:`lexkit.conformance.RopeConfig` as JSON) as a
Hugging Face model config gives RoPE to a runtime that reads HF configs (mlx-lm, vLLM): its
``rope_scaling`` / ``rope_parameters`` dict and its ``max_position_embeddings``. Plain Python, no
lexkit and no torch: the sides that import it run in the runtime's own interpreter. lexkit's
in-process HF adapter builds the same dict from lexkit's key table (``positions.scaling.HF_KEYS``);
tests/test_conformance.py checks that the two agree on every case."""

from __future__ import annotations

#: lexkit's YaRN / Llama 3 keys -> HF's
NAMES = {"low_freq": "low_freq_factor", "high_freq": "high_freq_factor"}


def rope_scaling(c: dict) -> dict | None:
    """HF's ``rope_scaling`` of the config (None for plain RoPE): ``rope_type``, ``factor``,
    ``original_max_position_embeddings`` (YaRN, Llama 3, LongRoPE) and the method's own keys (Llama
    3's two required, with their defaults 1 and 4; LongRoPE's factor lists)."""
    if c["scaling"] == "none":
        return None
    out = {"rope_type": c["scaling"], "factor": c["factor"]}
    if c["scaling"] in ("yarn", "llama3", "longrope"):  # dynamic NTK's L is max_position_embeddings (HF's rule)
        out["original_max_position_embeddings"] = c["original_len"]
    for key in ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate", "low_freq",
                "high_freq"):
        if c.get(key) is not None:
            out[NAMES.get(key, key)] = c[key]
    if c["scaling"] == "llama3":
        out.setdefault("low_freq_factor", 1.0)
        out.setdefault("high_freq_factor", 4.0)
    if c["scaling"] == "longrope":
        out.update(short_factor=list(c["short_factor"]), long_factor=list(c["long_factor"]))
    return out


def rope_parameters(c: dict) -> dict:
    """transformers 5's ``rope_parameters``: :func:`rope_scaling` (``rope_type`` ``default`` for plain
    RoPE) with ``rope_theta`` and, when it is not 1, ``partial_rotary_factor``."""
    out = {"rope_type": "default"} | (rope_scaling(c) or {}) | {"rope_theta": c["base"]}
    if c["fraction"] != 1.0:
        out["partial_rotary_factor"] = c["fraction"]
    return out


def max_positions(c: dict) -> int:
    """HF's ``max_position_embeddings``: L for dynamic NTK (its L), s·L for YaRN, Llama 3 and
    LongRoPE, 4096 otherwise (nothing reads it then)."""
    if c["scaling"] == "dynamic":
        return c["original_len"]
    if c["scaling"] in ("yarn", "llama3", "longrope"):
        return int(c["original_len"] * (c["factor"] or 1.0))
    return 4096
