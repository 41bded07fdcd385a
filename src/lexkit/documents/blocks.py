"""A document as data: blocks (headings, text, bullets, figures, tables) that every renderer draws
from the same source: markdown and the terminal's text (:mod:`lexkit.documents.render`), HTML
(:mod:`lexkit.documents.html`). :meth:`Table.of` is the one way a table is built, its numbers as
:class:`Number` (text and value, so a renderer can mark the best of a column)."""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple


class Number(NamedTuple):
    """A number in a table: its text and the value the best-per-column mark compares."""

    text: str
    value: float | None


@dataclasses.dataclass
class Table:
    """One table of the report: ``header`` and ``rows`` of text (unpacks as ``header, rows``),
    ``values`` (the number behind each cell, None for a label) and ``best``: column index ->
    ``"min"`` or ``"max"``, the columns whose best value the HTML report marks, by ``rule``."""

    header: list[str]
    rows: list[list[str]]
    values: list[list[float | None]]
    best: dict[int, str]
    rule: str = ""

    @classmethod
    def of(cls, header: list[str], rows: list[list[str | Number]], best: str | dict[int, str] | None = None,
           rule: str = "") -> Table:
        """A table from rows of labels (str) and :class:`Number` cells; ``best`` a rule for
        every column that holds numbers, or one per column."""
        if isinstance(best, str):
            best = {i: best for i in range(len(header)) if any(isinstance(r[i], Number) for r in rows)}
        return cls(header, [[c.text if isinstance(c, Number) else c for c in r] for r in rows],
                   [[c.value if isinstance(c, Number) else None for c in r] for r in rows], best or {}, rule)

    def __iter__(self):
        return iter((self.header, self.rows))

    def marked(self) -> set[tuple[int, int]]:
        """(row, column) of the best finite value of each ``best`` column (every tie marked)."""
        out = set()
        for col, rule in self.best.items():
            scored = [(v, i) for i, row in enumerate(self.values)
                      if (v := row[col]) is not None and math.isfinite(v)]
            if scored:
                target = (min if rule == "min" else max)(v for v, _ in scored)
                out |= {(i, col) for v, i in scored if v == target}
        return out


@dataclasses.dataclass
class Heading:
    text: str
    level: int = 2


@dataclasses.dataclass
class Text:
    """A paragraph; may hold ``**bold**``, ``*emphasis*`` and ```code```."""

    text: str


@dataclasses.dataclass
class Bullets:
    items: list[str]


@dataclasses.dataclass
class Figure:
    """A figure of the report (:data:`lexkit.study.report.figures.GRID_FIGURES`, or a table's
    ``figures``), by file name."""

    name: str
    alt: str


Block = Heading | Text | Bullets | Figure | Table
