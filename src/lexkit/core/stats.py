"""Intervals: one formula each, for the instruments that measure and the queries that compare
(:mod:`lexkit.retrieval`, the study's tables). :func:`wilson`, the interval of one binomial
proportion (the sampling of needles); :func:`mean_interval`, the Student t interval of the mean of
a few independent measurements (one proportion per training seed), with :func:`t_quantile`; and
:func:`mean_std`, the mean and sample standard deviation both it and the study's cells use; and
:func:`ratio_interval`, the interval of a ratio of two paired means (bpb at 16x over bpb at 1x, the
documents the sample)."""

from __future__ import annotations

import functools
import math

Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (Wilson 1927)."""
    if n <= 0:
        raise ValueError("a confidence interval needs at least one sample")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exact bounds, not a rounding residue
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def mean_std(values: list[float]) -> tuple[float, float | None]:
    """The mean and the sample standard deviation (n - 1 in the divisor; None below two values) of
    ``values`` (at least one)."""
    n = len(values)
    mean = sum(values) / n
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else None


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    out = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            out *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return out


def _beta_inc(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, 1 - x) / b


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom: 1 - I_x(df/2, 1/2) / 2 at
    x = df / (df + t^2) for t >= 0, symmetric below."""
    tail = 0.5 * _beta_inc(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t >= 0 else tail


@functools.cache
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (bisection on :func:`t_cdf`;
    12.706 for p = 0.975 and one degree of freedom, 1.960 as df grows)."""
    if not 0 < p < 1 or df < 1:
        raise ValueError(f"a t quantile needs 0 < p < 1 and df >= 1, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if t_cdf(mid, df) < p else (low, mid)
    return (low + high) / 2


def mean_interval(values: list[float], level: float = 0.95) -> tuple[float, float] | None:
    """The Student t interval of the mean of ``values`` (independent measurements, such as one
    exact-match rate per training seed): mean -+ t_{(1+level)/2, n-1} s / sqrt(n), s the sample
    standard deviation; None below two values (one seed says nothing of the spread between seeds)."""
    n = len(values)
    if n < 2:
        return None
    mean, s = mean_std(values)
    half = t_quantile((1 + level) / 2, n - 1) * s / math.sqrt(n)
    return mean - half, mean + half


def ratio_interval(a: list[float], b: list[float], level: float = 0.95) -> tuple[float, float, float] | None:
    """``(R, low, high)`` for R = mean(a) / mean(b), ``a[i]`` and ``b[i]`` measured on the same unit i
    (one document's bpb at 16x and at 1x): the delta method's standard error of a ratio of paired
    means, se = sqrt(var(a - R b) / n) / mean(b) (the residuals d_i = a_i - R b_i carry the pairing),
    and R -+ t_{(1+level)/2, n-1} se. None below two pairs or with mean(b) = 0; ValueError for lists
    of unequal length."""
    if len(a) != len(b):
        raise ValueError(f"a paired ratio needs as many values on each side, got {len(a)} and {len(b)}")
    n = len(a)
    if n < 2:
        return None
    mean_b = sum(b) / n
    if mean_b == 0:
        return None
    r = (sum(a) / n) / mean_b
    _, s = mean_std([x - r * y for x, y in zip(a, b)])
    half = t_quantile((1 + level) / 2, n - 1) * s / math.sqrt(n) / abs(mean_b)
    return r, r - half, r + half
