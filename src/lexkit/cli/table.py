"""The command line's tables, printed: :func:`lexkit.documents.render.text_table` (aligned columns, one line
per row, never wrapped) after an optional title."""

from __future__ import annotations

from collections.abc import Sequence

from ..documents.blocks import Table
from ..documents.render import text_table


def print_table(rows: Table | Sequence[Sequence[str]], align: str | None = None, *, title: str | None = None) -> None:
    """Print :func:`~lexkit.documents.render.text_table` (after ``title``, when given)."""
    if title:
        print(title)
    for line in text_table(rows, align):
        print(line)
