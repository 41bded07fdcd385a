"""The one plain-text table of the command line: aligned columns, one line per row, never
wrapped (so output stays greppable and diffable)."""

from __future__ import annotations

from collections.abc import Sequence

from ..report import multiple


def format_table(rows: Sequence[Sequence[str]], align: str | None = None) -> list[str]:
    """Lines of ``rows`` (the first row is the header) in aligned columns two spaces apart.

    ``align`` has one letter per column, ``l`` (left) or ``r`` (right); by default the first
    column is left-aligned (labels) and the others right-aligned (numbers). Trailing spaces are
    stripped, so a free-text last column is never padded.
    """
    if not rows:
        return []
    n = len(rows[0])
    align = align or "l" + "r" * (n - 1)
    if len(align) != n or set(align) - {"l", "r"}:
        raise ValueError(f"align {align!r}: expected one of l/r for each of {n} columns")
    widths = [max(len(row[i]) for row in rows) for i in range(n)]
    return [
        "  ".join(cell.ljust(w) if a == "l" else cell.rjust(w) for cell, w, a in zip(row, widths, align)).rstrip()
        for row in rows
    ]


def print_table(rows: Sequence[Sequence[str]], align: str | None = None, *, title: str | None = None) -> None:
    """Print :func:`format_table` (after ``title``, when given)."""
    if title:
        print(title)
    for line in format_table(rows, align):
        print(line)


def length_label(n: int, train_len: int | None) -> str:
    """A length as a column label, with its multiple of the training length (:func:`lexkit.report.multiple`):
    ``512 (4x)``, ``66 (1.03x)``, ``14 (0.219x)``."""
    return f"{n} ({multiple(n, train_len)})" if train_len else str(n)


def number(x: float | None) -> str:
    """A measured value (R, entropy) in a cell: 4 decimals, scientific below 1e-3, ``n/a`` for None."""
    if x is None:
        return "n/a"
    return f"{x:.4f}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"
