"""How lexkit writes a number or a length for a reader: one formatter each, shared by the study
report, the command line's tables and the figures' labels."""

from __future__ import annotations


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
    """``n`` as a multiple of the training length to three significant digits, never in exponent
    form: ``0.5x``, ``1x``, ``16x``, ``1.03x``, ``0.219x`` (the one format of every length label)."""
    ratio = float(f"{n / train_len:.3g}")
    return f"{ratio:g}x" if ratio < 1e6 else f"{ratio:.0f}x"


def length_label(n: int, train_len: int | None) -> str:
    """A length as a column label, with its multiple of the training length when there is one:
    ``512 (4x)``, ``66 (1.03x)``, ``14 (0.219x)``; ``512`` without a training length."""
    return f"{n} ({multiple(n, train_len)})" if train_len else str(n)
