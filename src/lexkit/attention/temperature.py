"""Attention temperatures: a factor on a query's pre-softmax scores that grows with its position.

A temperature multiplies the whole score of query m (content and any bias; a sink logit is not
scaled), so it is a per-query inverse temperature. Three kinds, each one formula, named in a
layout after ``+`` (``none@causal+logn``) and built by :func:`create`:

* ``logn`` (Su 2021, "entropy-invariant attention"): λ_m = max(1, ln(m + 1) / ln L), L the
  training length (:func:`lexkit.attention.logn.logn_scale`, the one definition the uniform
  ``--logn`` flag also uses).
* ``llama4`` (Meta's Llama 4, the temperature of its global NoPE layers; transformers'
  ``Llama4TextAttention``): τ_m = 1 + β·ln(floor((m + 1) / F) + 1), β = ``beta`` (0.1) and F =
  ``floor`` (8,192 in Llama 4, its chunk size; default here: the training length), so τ = 1
  inside the first F positions and grows by steps after.
* ``ssmax`` (Nakanishi 2025, "Scalable-Softmax Is Superior for Attention"): s_h·ln(m + 1) with
  one learned s_h per head of the layer (ln of the count of keys a causal query sees). The paper
  learns s; its initial value is lexkit's choice: s_h = 1 / ln L, so the factor is 1 at the
  training length when training starts.

Each depends on the position m, not on the pattern: under a window the count of visible keys stops
at W while the factor keeps growing; on a layered model a temperature belongs to the layers that
take it (the global ones), which is the point of giving each layer its own.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from ..registry import Registry
from ..specs import Param, describe_params, format_spec, parse_params, positive, split_spec
from .logn import logn_scale


class Temperature(nn.Module):
    """Base class: ``scale(pos [n]) -> [n]`` (one factor per query) or ``[heads, n]`` (per head)."""

    name: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {}
    summary: ClassVar[str] = ""
    #: parameters that default to the model's training length when the spec leaves them out
    train_len_params: ClassVar[tuple[str, ...]] = ()
    #: True when the temperature has learned parameters (one instance per layer)
    learned: ClassVar[bool] = False

    def __init__(self, n_heads: int, train_len: int, **values: Any) -> None:
        super().__init__()
        self.n_heads, self.train_len, self.values = n_heads, int(train_len), dict(values)

    def scale(self, pos: Tensor) -> Tensor:
        raise NotImplementedError

    @property
    def spec(self) -> str:
        return format_spec(self.name, self.params, self.values)

    def extra_repr(self) -> str:
        return f"spec={self.spec!r}"


#: Every temperature by name (``@lexkit.attention.temperature.register`` adds a user's own).
TEMPERATURES: Registry[type[Temperature]] = Registry("attention temperature", Temperature)
register = TEMPERATURES.register
names = TEMPERATURES.names


@register
class LogN(Temperature):
    """λ_m = max(1, ln(m + 1)/ln L) (Su 2021; the ReRoPE patches and Qwen-1's form)."""

    name = "logn"
    summary = "max(1, ln(m+1)/ln L): 1 inside the training length"

    def scale(self, pos: Tensor) -> Tensor:
        return logn_scale(pos, self.train_len)  # [n]


@register
class Llama4(Temperature):
    """τ_m = 1 + β·ln(floor((m + 1)/F) + 1) (Llama 4's NoPE layers, ``attn_temperature_tuning``)."""

    name = "llama4"
    params = {
        "beta": Param(float, 0.1, "β, Llama 4's attn_scale", positive, "> 0"),
        "floor": Param(int, None, "F, Llama 4's floor_scale (8192 there; default: the training length)",
                       positive, "> 0"),
    }
    train_len_params = ("floor",)
    summary = "1 + β·ln(floor((m+1)/F) + 1): Llama 4's global layers"

    def scale(self, pos: Tensor) -> Tensor:
        m = pos.to(torch.float64)
        tau = 1.0 + self.values["beta"] * torch.log1p(torch.floor((m + 1.0) / self.values["floor"]))
        return tau.to(torch.float32)  # [n]


@register
class SSMax(Temperature):
    """s_h·ln(m + 1), s_h learned per head (Scalable-Softmax, Nakanishi 2025); s starts at 1/ln L."""

    name = "ssmax"
    summary = "s_h·ln(m+1), s learned per head (Scalable-Softmax)"
    learned = True

    def __init__(self, n_heads: int, train_len: int, **values: Any) -> None:
        super().__init__(n_heads, train_len, **values)
        if train_len < 2:
            raise ValueError(f"ssmax needs a training length >= 2, got {train_len}")
        self.s = nn.Parameter(torch.full((n_heads,), 1.0 / math.log(train_len)))

    def scale(self, pos: Tensor) -> Tensor:
        log_n = torch.log1p(pos.to(torch.float32).clamp_min(0))  # [n]
        return self.s[:, None] * log_n[None, :].to(self.s.device)  # [H, n]


def parse(spec: str) -> tuple[type[Temperature], dict[str, Any]]:
    """Spec string -> (class, typed parameter values with defaults)."""
    name, items = split_spec(spec)
    cls = TEMPERATURES.get(name)
    return cls, parse_params(f"temperature {name}", cls.params, items)


def canonical(spec: str) -> str:
    cls, values = parse(spec)
    return format_spec(cls.name, cls.params, values)


def pin(spec: str, train_len: int) -> str:
    """The canonical spec with the parameters that default to the training length written out."""
    cls, values = parse(spec)
    for key in cls.train_len_params:
        if values.get(key) is None:
            values[key] = int(train_len)
    return format_spec(cls.name, cls.params, values)


def full(spec: str, train_len: int) -> str:
    """The pinned spec with every parameter written out, defaults included (what a run records)."""
    cls, values = parse(pin(spec, train_len))
    written = ",".join(f"{key}={values[key]}" for key in cls.params if values[key] is not None)
    return cls.name + (f":{written}" if written else "")


def create(spec: str, n_heads: int, train_len: int) -> Temperature:
    """A temperature from its spec (``logn``, ``llama4:beta=0.1,floor=8192``, ``ssmax``); parameters
    in ``train_len_params`` the spec leaves out take ``train_len``."""
    cls, values = parse(spec)
    for key in cls.train_len_params:
        if values.get(key) is None:
            values[key] = int(train_len)
    return cls(n_heads, train_len, **values)


def rows(scale: Tensor) -> Tensor:
    """A scale [n] or [heads, n] as a factor on score rows [..., heads, n, keys]: [n, 1] or [heads, n, 1]."""
    return scale.unsqueeze(-1)


def describe() -> list[tuple[str, str, str]]:
    return [(c.name, describe_params(c.params), c.summary) for c in TEMPERATURES]
