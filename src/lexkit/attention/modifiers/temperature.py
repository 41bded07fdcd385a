"""Attention temperatures: a factor on a query's pre-softmax scores that grows with its position.

A temperature multiplies the whole score of query m (content and any bias; a sink logit is not
scaled), so it is a per-query inverse temperature. Three kinds, each one formula, named in a layout
after ``+`` (``none@causal+logn``); a layer takes one (group ``temperature``):

* ``logn`` (Su 2021, "entropy-invariant attention"): λ_m = max(1, ln(m + 1) / ln L), L the
  training length (:func:`logn_scale`, the one definition the uniform ``--logn`` flag also uses).
  λ = 1 for every position seen in training (m + 1 <= L), so a model is unchanged inside its
  training length; ``max(1, .)`` is the form of the ReRoPE patches and Qwen-1.
* ``llama4`` (Meta's Llama 4, the temperature of its global NoPE layers; transformers'
  ``Llama4TextAttention``): τ_m = 1 + β·ln(floor((m + 1) / F) + 1), β = ``beta`` (0.1) and F =
  ``floor`` (8,192 in Llama 4, its chunk size; default here: the training length). τ = 1 while
  m + 1 < F, i.e. for the first F - 1 positions; position F - 1 already gets 1 + β·ln 2 (so with
  F = the training length the last trained position is scaled, as Llama 4's position 8,191 is).
* ``ssmax`` (Nakanishi 2025, "Scalable-Softmax Is Superior for Attention"): s_h·ln(m + 1) with
  one learned s_h per head of the layer (ln of the count of keys a causal query sees). The paper
  learns s; its initial value is lexkit's choice: s_h = 1 / ln L, so the factor is 1 at the
  training length when training starts.

Each depends on the position m, not on the pattern: under a window the count of visible keys stops
at W while the factor keeps growing, so a temperature belongs to a global layer (``global_only``).
Every parameter that defaults to the training length is pinned into the spec when a layer is parsed
(``logn:L=64``), so a fine-tune at another length keeps the temperature it trained with.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ...core.specs import Param, positive
from .base import Modifier, Shape


def logn_scale(pos: Tensor, train_len: int) -> Tensor:
    """λ_m = max(1, ln(m + 1)/ln L) per query, pos: [n] integer -> float32 [n]."""
    if train_len < 2:
        raise ValueError(f"log-n scaling needs a training length >= 2, got {train_len}")
    m = pos.to(torch.float64)
    return (torch.log1p(m.clamp_min(0)) / math.log(train_len)).clamp_min(1.0).to(torch.float32)


class Temperature(Modifier):
    """A factor per query that grows with its position (see the module docstring)."""

    place = "scores"
    group = "temperature"
    global_only = True


class LogN(Temperature):
    """λ_m = max(1, ln(m + 1)/ln L) (Su 2021; the ReRoPE patches and Qwen-1's form)."""

    name = "logn"
    params = {"L": Param(int, None, "L, the training length it is 1 within (default: the model's)",
                         lambda x: x >= 2, ">= 2")}
    train_len_params = ("L",)
    summary = "max(1, ln(m+1)/ln L): 1 inside the training length"
    source = "Su 2021, kexue.fm/archives/8823 (entropy-invariant attention)"

    def query_scale(self, state, pos: Tensor) -> Tensor:
        return logn_scale(pos, self.values["L"])  # [n]

    def inert_at(self, n: int) -> str | None:
        """λ_m = 1 for m + 1 <= L: every query of n <= L positions."""
        length = self.values["L"]
        return f"its factor is 1 at every position up to L = {length}" if length is not None and n <= length else None


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
    source = "Meta 2025, Llama 4 (transformers' Llama4TextAttention)"

    def query_scale(self, state, pos: Tensor) -> Tensor:
        m = pos.to(torch.float64)
        tau = 1.0 + self.values["beta"] * torch.log1p(torch.floor((m + 1.0) / self.values["floor"]))
        return tau.to(torch.float32)  # [n]

    def inert_at(self, n: int) -> str | None:
        """τ_m = 1 while m + 1 < F: every query of n < F positions."""
        floor = self.values["floor"]
        return f"its factor is 1 at every position below F = {floor}" if floor is not None and n < floor else None


class SSMaxScale(nn.Module):
    """SSMax's learned factor s_h per head (its state-dict key ``blocks.i.temperature.s``)."""

    def __init__(self, n_heads: int, train_len: int) -> None:
        super().__init__()
        self.s = nn.Parameter(torch.full((n_heads,), 1.0 / math.log(train_len)))


class SSMax(Temperature):
    """s_h·ln(m + 1), s_h learned per head (Scalable-Softmax, Nakanishi 2025); s starts at 1/ln L."""

    name = "ssmax"
    summary = "s_h·ln(m+1), s learned per head (Scalable-Softmax)"
    source = "Nakanishi 2025, arXiv 2501.19399"
    slot = "temperature"

    def check(self, shape: Shape) -> None:
        if shape.train_len < 2:
            raise ValueError(f"ssmax needs a training length >= 2, got {shape.train_len}")

    def state(self, shape: Shape) -> nn.Module:
        return SSMaxScale(shape.n_heads, shape.train_len)

    def query_scale(self, state: SSMaxScale, pos: Tensor) -> Tensor:
        log_n = torch.log1p(pos.to(torch.float32).clamp_min(0))  # [n]
        return state.s[:, None] * log_n[None, :].to(state.s.device)  # [H, n]
