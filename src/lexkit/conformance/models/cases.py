"""The model battery: tiny random checkpoints of the families whose long-context bugs users filed in
2025-26, each a :class:`ModelCase` (a transformers config, one line of why, the issue it comes from).

Every case is small enough for a runtime's CI: hidden 128, 4 heads of 32 (2 KV heads: vLLM's CPU attention
runs no head size below 32), 2-4 layers, a vocabulary of 256, an original length L of 64 and windows of 16,
so 32x the trained length is 2,048 tokens. A YaRN's factor is 32, so that ``max_position_embeddings`` is
its factor times L, as transformers' configs hold it (vLLM sizes YaRN's table by the factor). Checked
(:mod:`.harness`): prefill logits at every position at L and at 32·L; decode through
the runtime's own cache, one token a step and three, across the window, across L and at 32·L.
"""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
from dataclasses import dataclass, field

#: what every case's model has unless it says otherwise (transformers config fields)
BASE = {"hidden_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
        "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 256, "rms_norm_eps": 1e-6,
        "initializer_range": 0.1, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
        "tie_word_embeddings": False}
L = 64  # the original (trained) length of every case of the battery
W = 16  # the window of every windowed layer of the battery


@dataclass(frozen=True)
class ModelCase:
    name: str
    model_type: str
    config: dict = field(default_factory=dict)  # beside BASE
    why: str = ""
    source: str = ""  # the issue or PR the case comes from
    original: int = L

    @property
    def hf_config(self) -> dict:
        """The transformers config fields of the checkpoint (``model_type`` included): a copy of its own, nested
        dicts too (transformers' config classes standardize ``rope_parameters`` in place, which changed the
        case's content hash after its first checkpoint). A key the case sets to None is left out (a
        field of BASE its family's configs do not have)."""
        merged = {"model_type": self.model_type, **BASE, "max_position_embeddings": 32 * self.original, **self.config}
        return copy.deepcopy({key: value for key, value in merged.items() if value is not None})

    @property
    def window(self) -> int | None:
        return self.hf_config.get("sliding_window")

    @property
    def lengths(self) -> tuple[int, ...]:
        """The prefill lengths checked: L and 32·L."""
        return (self.original, 32 * self.original)

    def __str__(self) -> str:
        return self.name


def battery(L: int = L, W: int = W) -> list[ModelCase]:
    """The cases at original length L with windows of W (the battery's: 64 and 16; the tests' smaller)."""

    def _yarn(factor: float, **more) -> dict:
        return {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": L, **more}

    # LongRoPE's factors over 24 rotated dims (12 pairs: 3/4 of a head of 32)
    short = [1.0, 1.05, 1.1, 1.2, 1.3, 1.45, 1.6, 1.8, 2.0, 2.2, 2.35, 2.5]
    long = [1.0, 1.2, 1.5, 2.0, 2.5, 3.2, 4.0, 5.5, 8.0, 11.0, 14.0, 16.0]
    cases = [
        ModelCase("models/llama-llama3", "llama", {
            "rope_parameters": {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": L}},
            why="Llama 3's scaling (all three bands populated at h 16): a runtime that reads only part of the "
                "config, or never passes rope_parameters to its model, runs plain RoPE",
            source="unsloth PR #6197 (Llama 3.1 unscaled: a 48k needle fails); vLLM PR #21174"),
        ModelCase("models/qwen2-yarn", "qwen2", {
            "rope_parameters": {"rope_theta": 1000000.0, **_yarn(32.0)}, "layer_types": ["full_attention"] * 2},
            why="Qwen's YaRN x32 at base 1e6 with q/k/v biases: the attention factor 0.1 ln 32 + 1 on cos and sin",
            source="llama.cpp PR #13331/#13312 (a converter that never writes YaRN's metadata)"),
        ModelCase("models/llama-yarn-attention-factor", "llama", {
            "rope_parameters": {"rope_theta": 10000.0, **_yarn(32.0, attention_factor=1.0)}},
            why="YaRN x32 with an explicit attention_factor of 1 (no logit scaling): a runtime that drops it "
                "scales q·k by (0.1 ln 32 + 1)² = 1.81",
            source="vLLM PR #46280/#48351, mlx-lm PR #1507"),
        ModelCase("models/qwen3-yarn-mscale", "qwen3", {
            "rope_parameters": {"rope_theta": 10000.0, **_yarn(32.0, mscale=1.0, mscale_all_dim=0.5)},
            "layer_types": ["full_attention"] * 2},
            why="YaRN with DeepSeek's mscale/mscale_all_dim ratio and Qwen3's per-head q/k norms",
            source="transformers PR #47435"),
        ModelCase("models/phi3-longrope", "phi3", {
            "rope_parameters": {"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": short,
                                "long_factor": long, "partial_rotary_factor": 0.75},
            "original_max_position_embeddings": L, "partial_rotary_factor": 0.75},
            why="Phi-4-mini's LongRoPE over 3/4 of each head: short factors up to L, long ones past it, "
                "chosen by the sequence, not by the context a runtime allocates",
            source="llama.cpp #24823 (chosen by the allocated context); cascadia PR #69 (partial rotary pairs)"),
        ModelCase("models/mistral-window", "mistral", {"sliding_window": W, "rope_theta": 10000.0},
            why="a sliding window of 16 on every layer (no layer_types: Mistral's rule); a window one wider, "
                "or a ring cache that keeps what it should evict on multi-token steps, shows past 16",
            source="TensorRT-LLM PR #5564 (a window off by one); mlx-lm #1914 (a ring cache that never evicts)"),
        ModelCase("models/olmo3-hybrid", "olmo3", {
            "num_hidden_layers": 4, "sliding_window": W,
            "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
            "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                "full_attention": {"rope_theta": 500000.0, **_yarn(32.0)}}},
            why="OLMo 3: three sliding layers unscaled at base 1e4 beside a YaRN full layer at 5e5; the full "
                "layer's base or scaling on the sliding ones, or their window on the full one, shows",
            source="exllamav3 #131 (OLMo 3 incoherent at 2k from its sliding layers' RoPE); vLLM PR #21927"),
        ModelCase("models/gpt-oss", "gpt_oss", {
            "layer_types": ["sliding_attention", "full_attention"], "sliding_window": W, "intermediate_size": 32,
            "num_local_experts": 4, "num_experts_per_tok": 2,
            "rope_parameters": {"rope_theta": 150000.0, **_yarn(32.0, beta_fast=32.0, beta_slow=1.0,
                                                                truncate=False)}},
            why="GPT-OSS: a learned sink logit per head, a banded window on every other layer, YaRN x32 with "
                "truncate false, experts: sinks dropped or the window lost shows",
            source="SGLang PR #30050 and #11634 (sinks dropped in batched decode; SWA with sinks wrong); a GPT-OSS "
                   "builder reading only rope_parameters (YaRN off, no window)"),
        ModelCase("models/gemma3", "gemma3_text", {
            "num_hidden_layers": 3, "sliding_window": W, "query_pre_attn_scalar": 32,
            "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
            "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0}}},
            why="Gemma 3: local layers at base 1e4 under a window, a global layer at 1e6 with linear x8, (1 + w) "
                "norms around attention and the MLP, embeddings times √d: linear 8 on the local layers, or "
                "not on the global one, shows",
            source="mlx-vlm PR #1709 (linear 8 on global layers never applied: greedy argmax changed at 2,916 "
                   "tokens); vLLM PR #21927 (Gemma 3's interleaving missed with layer_types)"),
        ModelCase("models/cohere2", "cohere2", {
            "num_hidden_layers": 4, "sliding_window": W, "logit_scale": 0.25, "layer_norm_eps": 1e-5,
            "tie_word_embeddings": True,  # as Cohere's configs have it (mlx-lm, llama.cpp and vLLM assume it)
            "rms_norm_eps": None,  # as Cohere's dense configs: vLLM's commandr.py builds RMSNorm where the key is
            "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
            "rope_parameters": {"rope_type": "default", "rope_theta": 50000.0}},
            why="Cohere 2: RoPE (interleaved pairs) on the three window layers only, the full layer NoPE, attention "
                "and the MLP in parallel from one LayerNorm: RoPE on the global layer, the window on it, or the "
                "pairs split in halves, shows",
            source="issue 67's list (Llama 4's chunked attention or Cohere 2); vLLM PR #21927 (interleaving missed "
                   "when configs moved to layer_types)"),
        ModelCase("models/olmo3-window-unused", "olmo3", {
            "sliding_window": W, "layer_types": ["full_attention"] * 2,
            "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
            why="sliding_window set but every layer full: the window must apply to no layer",
            source="vLLM #49795 (a sliding_window applied to every layer when layer_types are all full)"),
    ]
    return [dataclasses.replace(c, original=L) for c in cases]


CASES: tuple[ModelCase, ...] = tuple(battery())


def cases(patterns: list[str] | None = None) -> list[ModelCase]:
    """The model cases whose names match any of the globs (all without); ValueError for one that
    matches none."""
    if not patterns:
        return list(CASES)
    out = []
    for pattern in patterns:
        hit = [c for c in CASES if fnmatch.fnmatchcase(c.name, pattern) or pattern == "models"]
        if not hit:
            raise ValueError(f"--case {pattern!r} matches no model case; they are: "
                             f"{', '.join(c.name for c in CASES)}")
        out += [c for c in hit if c not in out]
    return out
