"""Bias schemes: each defines ``bias(head, dist)`` once, for ``dist = m - n >= 0``.

That definition feeds the dense additive mask, the FlexAttention ``score_mod`` (through
:meth:`Scheme.bias_fn`, whose functions take the query's position as a third argument and ignore
it here) and the resolution instrument's analytic curve. On FlexAttention a bias with
a closed form is computed in the kernel from per-head ``[H]`` vectors (ALiBi's slopes, KERPLE's
clamped parameters: one scalar load per program). Only a bias that *is* a table gathers one:
Sandwich's distance curve (float32: half precision loses ~0.03 at its magnitude ~64) and T5's
bucket index per distance (int8 up to 127 buckets), the smallest dtype that keeps the dense path's
numbers (:func:`smallest_table`). A float32 [BLOCK_M, BLOCK_N] gather is what Triton multi-buffers
through shared memory (docs/kernels.md).

KERPLE and T5 are learnable. The model keeps one scheme module shared by all layers, as the
reference gpt-neox (KERPLE) and T5 code do.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..core.specs import Param, positive
from .base import Scheme, register

#: largest absolute change a table's dtype may make to the float32 bias (scores differ by at most this)
TABLE_ATOL = 1e-6


def smallest_table(values: Tensor, atol: float = TABLE_ATOL) -> Tensor:
    """``values`` in the narrowest dtype that keeps them within ``atol`` of their float32 values:
    integer values in int8/int16/int32, others in float16/bfloat16/float32, checked element-wise."""
    exact = values.to(torch.float32)
    if not values.is_floating_point():
        for dtype in (torch.int8, torch.int16, torch.int32):
            info = torch.iinfo(dtype)
            if values.numel() == 0 or (int(values.min()) >= info.min and int(values.max()) <= info.max):
                return values.to(dtype)
        return values.to(torch.int64)
    for dtype in (torch.float16, torch.bfloat16):
        narrow = exact.to(dtype)
        if torch.isfinite(narrow).all() and bool(((narrow.float() - exact).abs() <= atol).all()):
            return narrow
    return exact


def alibi_slopes(n_heads: int) -> Tensor:
    """ALiBi head slopes (Press et al. 2022, Sec. 3; fairseq/BLOOM/MPT), float64 [H].

    H a power of two: 2^(-8h/H), h = 1 .. H. Otherwise, with P = 2^floor(log2 H): the P slopes
    of the power-of-two rule, then the slopes at even 0-based indices of the 2P rule, the first
    H - P of them.
    """

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    p = 2 ** int(math.floor(math.log2(n_heads)))
    slopes = power_of_two(p)
    if p < n_heads:
        slopes += power_of_two(2 * p)[0::2][: n_heads - p]
    return torch.tensor(slopes, dtype=torch.float64)


class BiasScheme(Scheme):
    family = "bias"


@register
class ALiBi(BiasScheme):
    """ALiBi (Press et al. 2022, Eq. 1 / Fig. 3): bias = -slope_h · d."""

    name = "alibi"
    summary = "linear bias -slope_h·d, geometric slopes"

    def __init__(self, n_heads: int, head_dim: int, **values) -> None:
        super().__init__(n_heads, head_dim, **values)
        self.register_buffer("slopes", alibi_slopes(n_heads).to(torch.float32), persistent=False)

    def bias(self, head: Tensor, dist: Tensor) -> Tensor:
        return -self.slopes[head] * dist  # flex: slope[h] * (kv_idx - q_idx), a captured [H] vector


class Kerple(BiasScheme):
    """KERPLE (Chi et al. 2022, Eq. 10-11; chijames/KERPLE gpt-neox code): one (a, p) pair per
    head, shared by all layers. Init p ~ 2·U(0,1), a ~ U(0,1). The values used in the bias are
    always clamped into range, and :meth:`constrain_` clamps the parameters in place after each
    optimizer step, as the reference code does on every forward."""

    A_MIN = 0.01
    P_MIN = 0.01
    P_MAX: float | None = None  # the power variant caps p at 2

    def __init__(self, n_heads: int, head_dim: int, **values) -> None:
        super().__init__(n_heads, head_dim, **values)
        self.p = nn.Parameter(2.0 * torch.rand(n_heads))
        self.a = nn.Parameter(torch.rand(n_heads))
        self.constrain_()

    def constrain_(self) -> None:
        with torch.no_grad():
            self.a.clamp_(min=self.A_MIN)
            self.p.clamp_(min=self.P_MIN, max=self.P_MAX)

    def effective(self) -> tuple[Tensor, Tensor]:
        """(a, p) as used in the bias: inside the constraints whatever the raw parameters hold."""
        return self.a.clamp(min=self.A_MIN), self.p.clamp(min=self.P_MIN, max=self.P_MAX)


@register
class KerplePower(Kerple):
    """KERPLE power variant: bias = -a_h · d^p_h, a >= 0.01, 0.01 <= p <= 2."""

    name = "kerple-power"
    summary = "learnable -a_h·d^p_h (a >= 0.01, 0.01 <= p <= 2)"
    P_MAX = 2.0

    def bias(self, head: Tensor, dist: Tensor) -> Tensor:
        return self.bias_fn(0)(head, dist)

    def bias_fn(self, n: int, device=None):
        a, p = self.effective()  # [H] each, clamped once per forward; gradients flow through the clamp

        def power(head: Tensor, dist: Tensor, pos: Tensor | None = None) -> Tensor:
            return -a[head] * dist.to(a.dtype).pow(p[head])

        return power


@register
class KerpleLog(Kerple):
    """KERPLE log variant: bias = -p_h · log(1 + a_h · d), a, p >= 0.01."""

    name = "kerple-log"
    summary = "learnable -p_h·log(1 + a_h·d) (a, p >= 0.01)"

    def bias(self, head: Tensor, dist: Tensor) -> Tensor:
        return self.bias_fn(0)(head, dist)

    def bias_fn(self, n: int, device=None):
        a, p = self.effective()  # [H] each, clamped once per forward

        def log(head: Tensor, dist: Tensor, pos: Tensor | None = None) -> Tensor:
            return -p[head] * torch.log1p(a[head] * dist.to(a.dtype))

        return log


def sandwich_raw(dist: Tensor, dim: int) -> Tensor:
    """p_m·p_n = Σ_{k=1}^{dim/2} cos(d·ω_k), ω_k = 10000^(-2k/dim), minus dim/2 (so 0 at d = 0).

    The frequencies are Vaswani's shifted by one (NeMo's choice). float64, same shape as dist.
    """
    k = torch.arange(1, dim // 2 + 1, dtype=torch.float64, device=dist.device)
    omega = 10000.0 ** (-2.0 * k / dim)  # [dim/2]
    return torch.cos(dist.to(torch.float64)[..., None] * omega).sum(-1) - dim / 2


@register
class Sandwich(BiasScheme):
    """Sandwich (Chi et al. 2022, "Receptive Field Alignment", Eq. 3): bias = λ_h·(p_m·p_n - h'/2)
    with sinusoidal p of dim h'; head j = 1..H is divided by 8j/H (attention-gym, NeMo). The
    curve oscillates while decreasing on average; it is not strictly monotone."""

    name = "sandwich"
    compile_refusal = "builds its bias with branches on tensor values (a graph break)"
    params = {
        "dim": Param(int, 128, "h', dimension of the sinusoids (even)", lambda x: x > 0 and x % 2 == 0,
                     "a positive even integer"),
    }
    summary = "λ_h·(p_m·p_n - h'/2) with sinusoidal p"

    def __init__(self, n_heads: int, head_dim: int, **values) -> None:
        super().__init__(n_heads, head_dim, **values)
        j = torch.arange(1, n_heads + 1, dtype=torch.float32)
        self.register_buffer("divisor", 8.0 * j / n_heads, persistent=False)

    def bias(self, head: Tensor, dist: Tensor) -> Tensor:
        # the d-curve is evaluated once per distinct distance (a table), then gathered
        flat = dist.reshape(-1)
        uniq, inverse = torch.unique(flat, return_inverse=True)
        raw = sandwich_raw(uniq, self.values["dim"]).to(torch.float32)[inverse].reshape(dist.shape)
        return raw / self.divisor[head]

    def bias_fn(self, n: int, device=None):
        device = device if device is not None else self.divisor.device
        curve = smallest_table(sandwich_raw(torch.arange(n, device=device), self.values["dim"]))  # [n]
        divisor = self.divisor

        def sandwich(head: Tensor, dist: Tensor, pos: Tensor | None = None) -> Tensor:
            return curve[dist].to(torch.float32) / divisor[head]

        return sandwich


def t5_bucket(dist: Tensor, buckets: int, max_distance: int) -> Tensor:
    """T5's causal relative-position bucket (Raffel et al. 2020; HF `_relative_position_bucket`
    with bidirectional=False): exact below buckets/2, log-spaced up to max_distance, capped."""
    n = dist.clamp_min(0)
    exact = buckets // 2
    big = n.to(torch.float32).clamp_min(1.0)
    log_bucket = exact + (
        torch.log(big / exact) / math.log(max_distance / exact) * (buckets - exact)
    ).to(torch.long)
    log_bucket = log_bucket.clamp_max(buckets - 1)
    return torch.where(n < exact, n, log_bucket)


@register
class T5(BiasScheme):
    """T5 relative bias (Raffel et al. 2020, Sec. 2.1): a learned [buckets, H] table indexed by a
    log-bucket of the distance, shared by all layers."""

    name = "t5"
    compile_refusal = "narrows its bucket table by the values it holds (data-dependent; torch 2.13's tracer fails)"
    params = {
        "buckets": Param(int, 32, "number of buckets (>= 2)", lambda x: x >= 2, ">= 2"),
        "max_distance": Param(int, 128, "distance of the last bucket", positive, "> 0"),
    }
    summary = "learned bias per log-bucket of distance"

    def __init__(self, n_heads: int, head_dim: int, **values) -> None:
        super().__init__(n_heads, head_dim, **values)
        if values["max_distance"] <= values["buckets"] // 2:
            raise ValueError(
                f"scheme t5: max_distance={values['max_distance']} must exceed buckets/2={values['buckets'] // 2}"
            )
        self.table = nn.Parameter(torch.randn(values["buckets"], n_heads) * 0.02)

    def bias(self, head: Tensor, dist: Tensor) -> Tensor:
        bucket = t5_bucket(dist, self.values["buckets"], self.values["max_distance"])
        return self.table[bucket, head]

    def bias_fn(self, n: int, device=None):
        device = device if device is not None else self.table.device
        dist = torch.arange(n, device=device)
        bucket = smallest_table(t5_bucket(dist, self.values["buckets"], self.values["max_distance"]))  # [n] int8
        table = self.table  # [buckets, H], learned: gradients reach it through the gather

        def t5(head: Tensor, dist: Tensor, pos: Tensor | None = None) -> Tensor:
            return table[bucket[dist].to(torch.int32), head]

        return t5
