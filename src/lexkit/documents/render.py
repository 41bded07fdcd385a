"""Renderers: a document of :mod:`lexkit.documents.blocks` as markdown; a table as the terminal's aligned text;
rows as CSV. (HTML, the same blocks with figures embedded: :mod:`lexkit.documents.html`.) Nothing here
computes a number: what a cell says was decided when the table was built."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from .blocks import Block, Bullets, Figure, Heading, Table, Text


# -- markdown -------------------------------------------------------------------------------------
def markdown_table(table: Table) -> str:
    """The table in GitHub markdown; a ``|`` inside a cell (a pattern ``window:64|first:4``) escaped, so
    it stays one cell."""
    def row(cells) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    lines = [row(table.header), "|" + "|".join(" --- " for _ in table.header) + "|"]
    lines += [row(r) for r in table.rows]
    return "\n".join(lines)


def markdown_block(block: Block) -> str:
    if isinstance(block, Heading):
        return "#" * block.level + " " + block.text
    if isinstance(block, Text):
        return block.text
    if isinstance(block, Bullets):
        return "\n".join(f"- {item}" for item in block.items)
    if isinstance(block, Figure):
        return f"![{block.alt}]({block.name})"
    return markdown_table(block)


def markdown(blocks: Sequence[Block]) -> str:
    """The blocks as one markdown document, a blank line between blocks."""
    return "\n\n".join(markdown_block(b) for b in blocks) + "\n"


# -- the terminal -------------------------------------------------------------------------------
def text_table(rows: Table | Sequence[Sequence[str]], align: str | None = None) -> list[str]:
    """Lines of ``rows`` (the first row is the header; a :class:`Table` gives its header and rows) in
    aligned columns two spaces apart, one line per row, never wrapped (so output stays greppable
    and diffable).

    ``align`` has one letter per column, ``l`` (left) or ``r`` (right); by default the first
    column is left-aligned (labels) and the others right-aligned (numbers). Trailing spaces are
    stripped, so a free-text last column is never padded.
    """
    if isinstance(rows, Table):
        rows = [rows.header, *rows.rows]
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


# -- CSV ------------------------------------------------------------------------------------------
def csv_text(rows: Sequence[dict], fields: Sequence[str] | None = None) -> str:
    """``rows`` as CSV, a header line of ``fields`` first (default: the first row's keys), one
    ``\\n``-terminated line per row; a value of None is an empty field."""
    fields = list(fields if fields is not None else rows[0] if rows else [])
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
