"""Intervals of measured proportions: one formula, for the instruments that measure and the queries
that compare (:mod:`lexkit.retrieval`, :mod:`lexkit.results`)."""

from __future__ import annotations

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
