"""``lexkit schemes``: the registry of position schemes, one line each."""

from __future__ import annotations

from .. import positions


def add_parser(sub):
    return sub.add_parser("schemes", help="list the position schemes", description=__doc__)


def run(args) -> int:
    rows = [("name", "family", "parameters (defaults)", "what it does")] + positions.describe()
    print_rows(rows)
    return 0


def print_rows(rows: list[tuple[str, ...]]) -> None:
    """Aligned plain columns, one line per row (greppable; never wrapped)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])
