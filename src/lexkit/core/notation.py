"""How lexkit writes a number or a length for a reader: one formatter each, shared by the study
report, the command line's tables and the figures' labels."""

from __future__ import annotations

import math


def number(mean: float | None, std: float | None = None, digits: int = 3, *, small: bool = False) -> str:
    """``mean`` (± ``std``) to ``digits`` decimals (3 significant digits from 1e4 up, and below 1e-3
    when ``small``: a quantity spanning decades, such as a resolution), ``n/a`` for None; a value
    that rounds to zero reads ``0.000``, never ``-0.000``."""
    if mean is None:
        return "n/a"
    if small and 0 < abs(mean) < 1e-3:
        return f"{mean:.2e}" + (f" ± {std:.2e}" if std is not None else "")
    return _unsigned_zero(f"{mean:.{digits}f}" if abs(mean) < 1e4 else f"{mean:.3g}") + (
        f" ± {std:.{digits}f}" if std is not None else "")


def signed(x: float, digits: int = 3) -> str:
    """A difference with its sign (``+0.012``, ``-0.120``); one that rounds to zero reads ``0.000``."""
    text = f"{x:+.{digits}f}"
    return text[1:] if float(text) == 0 else text


def _unsigned_zero(text: str) -> str:
    return text.lstrip("-") if float(text) == 0 else text


def multiple(n: int, train_len: int) -> str:
    """``n`` as a multiple of the training length: exact when whole (``1x``, ``16x``, ``1024x``),
    else to three significant digits and every digit of its whole part, never in exponent form
    (``0.5x``, ``1.03x``, ``0.219x``, ``0.000977x``): the one format of every length label."""
    ratio = n / train_len
    if ratio == int(ratio):
        return f"{int(ratio)}x"
    digits = max(3, len(str(int(ratio))))
    decimals = max(0, digits - 1 - math.floor(math.log10(ratio)))
    return f"{ratio:.{decimals}f}".rstrip("0").rstrip(".") + "x"


def percent(x: float) -> str:
    """A proportion in percent, whole unless rounding would make it read 0 or 100 when it is
    neither: ``97``, ``99.8`` (not ``100``), ``0.2``; ``>99.9`` and ``<0.1`` beyond that."""
    v = 100 * x
    text = f"{v:.0f}"
    if text in ("0", "100") and v not in (0.0, 100.0):
        text = f"{v:.1f}"
        if text in ("0.0", "100.0"):
            text = "<0.1" if v < 50 else ">99.9"
    return text


def length_label(n: int, train_len: int | None) -> str:
    """A length as a column label, with its multiple of the training length when there is one:
    ``512 (4x)``, ``66 (1.03x)``, ``14 (0.219x)``; ``512`` without a training length."""
    return f"{n} ({multiple(n, train_len)})" if train_len else str(n)


def ratio_with_interval(ratio: float, low: float | None, high: float | None, digits: int = 3) -> str:
    """``0.891 [0.871-0.910]``: a ratio and its interval (the ratio alone where it has none)."""
    return f"{ratio:.{digits}f}" + ("" if low is None else f" [{low:.{digits}f}-{high:.{digits}f}]")


def count(n: int, noun: str) -> str:
    """``1 document``, ``2,048 documents``: a count and its noun, plural unless one (``noun`` + s)."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def count_range(values: list[int], noun: str) -> str:
    """:func:`count` of one value, or ``12-24 documents`` over several (lowest to highest)."""
    low, high = min(values), max(values)
    return count(low, noun) if low == high else f"{low:,}-{high:,} {noun}s"
