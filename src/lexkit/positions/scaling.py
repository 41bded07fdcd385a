"""RoPE context extension: named functions from (head_dim, base, settings, length) to the inverse
frequencies θ_i and the attention factor a, the conventions of Hugging Face transformers'
``modeling_rope_utils`` (``ROPE_INIT_FUNCTIONS``; docs/context-extension.md has the formulas).

Notation: h = rotary dims (the head dim), θ_i = base^(-2i/h), i = 0 .. h/2 - 1; L = the original
(training) length ``original_len``; s = ``factor``. As in HF, the attention factor a multiplies both
cos and sin, so every q·k logit is multiplied by a².

* ``linear`` (position interpolation, Chen et al. 2023): θ_i / s; a = 1.
* ``ntk`` (NTK-aware, bloc97 2023; not in HF, which has only the dynamic form):
  base' = base · s^(h/(h-2)); a = 1.
* ``dynamic`` (dynamic NTK, HF ``_compute_dynamic_ntk_parameters``): base' = base · (s·n/L - (s - 1))^(h/(h-2))
  with n = max(current length, L); the current length is max(position) + 1 of the forward pass; a = 1.
* ``yarn`` (Peng et al. 2023, HF ``_compute_yarn_parameters``): corr(r) = h·ln(L/(2π r)) / (2 ln base);
  low = max(floor(corr(β_fast)), 0), high = min(ceil(corr(β_slow)), h - 1);
  ramp_i = clamp((i - low)/(high - low), 0, 1) (high += 0.001 if equal); θ'_i = θ_i·(1 - ramp_i) + θ_i/s·ramp_i;
  a = 0.1·ln s + 1 (1 for s <= 1). Defaults β_fast = 32, β_slow = 1. ``truncate=false`` (gpt-oss) keeps
  corr(β_fast) and corr(β_slow) unrounded (no floor and ceil). An explicit ``attention_factor`` is a
  itself; else with both ``mscale`` and ``mscale_all_dim`` given and non-zero (DeepSeek-V2/V3),
  a = m(s, mscale) / m(s, mscale_all_dim) with m(s, μ) = 0.1·μ·ln s + 1 (1 for s <= 1): 1 when the
  two are equal; either alone is ignored, as transformers does (DeepSeek's reference code and mlx-lm
  count ``mscale`` alone: a convention, docs/conformance.md).
* ``llama3`` (Llama 3.1, HF ``_compute_llama3_parameters``): λ_i = 2π/θ_i; λ_i > L/low → θ_i/s;
  λ_i < L/high → θ_i; between, with σ = (L/λ_i - low)/(high - low), θ'_i = (1 - σ)·θ_i/s + σ·θ_i. a = 1.
  Defaults low = 1, high = 4.

Everything is float64 (HF computes in float32; tests compare at float32 tolerance).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

#: parameters each method reads beside ``factor`` and ``original_len``
METHOD_PARAMS: dict[str, tuple[str, ...]] = {
    "none": (),
    "linear": (),
    "ntk": (),
    "dynamic": (),
    "yarn": ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate"),
    "llama3": ("low_freq", "high_freq"),
}
#: transformers' ``rope_type`` of a method where its name differs from lexkit's (modeling_rope_utils)
HF_ROPE_TYPE = {"none": "default"}
#: lexkit's names of RoPE's settings -> transformers' ``rope_parameters`` keys: the one table the
#: Hugging Face path (lexkit.model.hf) and the conformance adapter (lexkit.conformance.adapters.hf) read
HF_KEYS = {"base": "rope_theta", "factor": "factor", "original_len": "original_max_position_embeddings",
           "low_freq": "low_freq_factor", "high_freq": "high_freq_factor", "fraction": "partial_rotary_factor",
           "beta_fast": "beta_fast", "beta_slow": "beta_slow", "attention_factor": "attention_factor",
           "mscale": "mscale", "mscale_all_dim": "mscale_all_dim", "truncate": "truncate",
           "short_factor": "short_factor", "long_factor": "long_factor"}


def hf_rope_type(method: str) -> str:
    """transformers' ``rope_type`` of lexkit's method (``none`` -> ``default``)."""
    return HF_ROPE_TYPE.get(method, method)


def lexkit_method(rope_type: str) -> str:
    """lexkit's method of transformers' ``rope_type`` (``default`` -> ``none``)."""
    return {hf: ours for ours, hf in HF_ROPE_TYPE.items()}.get(rope_type, rope_type)


#: methods that need the original (training) length L
NEEDS_LENGTH = ("dynamic", "yarn", "llama3")
METHODS = tuple(METHOD_PARAMS)


def base_inv_freq(head_dim: int, base: float) -> Tensor:
    """θ_i = base^(-2i/h), float64 [h/2]."""
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return base ** (-2.0 * i / head_dim)


def _none(h: int, base: float, v: dict, n: int) -> tuple[Tensor, float]:
    return base_inv_freq(h, base), 1.0


def _linear(h: int, base: float, v: dict, n: int) -> tuple[Tensor, float]:
    return base_inv_freq(h, base) / v["factor"], 1.0


def _ntk(h: int, base: float, v: dict, n: int) -> tuple[Tensor, float]:
    return base_inv_freq(h, base * v["factor"] ** (h / (h - 2))), 1.0


def _dynamic(h: int, base: float, v: dict, n: int) -> tuple[Tensor, float]:
    s, L = v["factor"], v["original_len"]
    n = max(n, L)
    return base_inv_freq(h, base * ((s * n / L) - (s - 1)) ** (h / (h - 2))), 1.0


def yarn_mscale(s: float, mscale: float = 1.0) -> float:
    """m(s, μ) = 0.1·μ·ln s + 1, 1 for s <= 1 (YaRN's attention factor; DeepSeek's ``yarn_get_mscale``)."""
    return 0.1 * mscale * math.log(s) + 1.0 if s > 1 else 1.0


def yarn_attention_factor(s: float, v: dict) -> float:
    """a: ``attention_factor`` when given; m(s, mscale)/m(s, mscale_all_dim) when both are given and
    non-zero; else m(s, 1) (transformers' rule; the module docstring)."""
    if v.get("attention_factor") is not None:
        return float(v["attention_factor"])
    if v.get("mscale") and v.get("mscale_all_dim"):
        return yarn_mscale(s, v["mscale"]) / yarn_mscale(s, v["mscale_all_dim"])
    return yarn_mscale(s)


def _yarn(h: int, base: float, v: dict, n: int) -> tuple[Tensor, float]:
    s, L = v["factor"], v["original_len"]

    def corr(rotations: float) -> float:
        return h * math.log(L / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = corr(v["beta_fast"]), corr(v["beta_slow"])
    if v["truncate"]:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, h - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(h // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)  # [h/2]
    theta = base_inv_freq(h, base)
    return theta * (1 - ramp) + theta / s * ramp, yarn_attention_factor(s, v)


def _llama3(h: int, base: float, v: dict, n: int) -> tuple[Tensor, float]:
    s, L, low, high = v["factor"], v["original_len"], v["low_freq"], v["high_freq"]
    theta = base_inv_freq(h, base)
    wavelen = 2 * math.pi / theta
    out = torch.where(wavelen > L / low, theta / s, theta)
    smooth = (L / wavelen - low) / (high - low)
    medium = (wavelen >= L / high) & (wavelen <= L / low)
    return torch.where(medium, (1 - smooth) * theta / s + smooth * theta, out), 1.0


#: name -> f(head_dim, base, values, current_length) -> (θ' float64 [h/2], attention factor a)
SCALINGS: dict[str, Callable[[int, float, dict, int], tuple[Tensor, float]]] = {
    "none": _none, "linear": _linear, "ntk": _ntk, "dynamic": _dynamic, "yarn": _yarn, "llama3": _llama3,
}


def unused(owner: str, given: set[str], values: dict) -> None:
    """ValueError for a parameter given in a spec that changes nothing: ``original_len``
    without a scaling (an unscaled RoPE reads no training length)."""
    if "original_len" in given and values.get("scaling", "none") == "none":
        raise ValueError(f"{owner}: original_len changes nothing without a scaling; give "
                         f"scaling={'|'.join(METHODS[1:])} with it, or leave it out")


def check(owner: str, values: dict) -> None:
    """ValueError for a scaling that cannot work: unknown name, a missing factor or length, or a
    parameter given that the method does not read."""
    method = values.get("scaling", "none")
    if method not in SCALINGS:
        raise ValueError(f"{owner}: unknown scaling {method!r}; valid: {', '.join(METHODS)}")
    if method == "none":
        if values.get("factor") is not None:
            raise ValueError(f"{owner}: factor needs a scaling method (scaling={'|'.join(METHODS[1:])})")
    elif values.get("factor") is None:
        example = f"{owner.split()[-1]}:scaling={method},factor=4"
        raise ValueError(f"{owner}: scaling={method} needs a factor (e.g. {example})")
    if method in NEEDS_LENGTH and values.get("original_len") is None:
        raise ValueError(f"{owner}: scaling={method} needs original_len (the training length)")
    for method_name, keys in METHOD_PARAMS.items():
        for key in keys:
            if values.get(key) is not None and method != method_name:
                raise ValueError(f"{owner}: {key} applies only to scaling={method_name}")
    low, high = values.get("low_freq") or 1.0, values.get("high_freq") or 4.0
    if method == "llama3" and not low < high:
        raise ValueError(f"{owner}: llama3 needs low_freq < high_freq, got {low}, {high}")


def inv_freq(head_dim: int, base: float, values: dict, length: int = 0) -> tuple[Tensor, float]:
    """(θ' float64 [h/2], a) of the scaling named by ``values["scaling"]`` at current ``length``
    (only ``dynamic`` reads it). Unset method defaults (β, low/high) take HF's values."""
    method = values.get("scaling", "none")
    filled = {"beta_fast": 32.0, "beta_slow": 1.0, "low_freq": 1.0, "high_freq": 4.0, "truncate": True}
    filled.update({k: v for k, v in values.items() if v is not None})
    return SCALINGS[method](head_dim, base, filled, int(length))
