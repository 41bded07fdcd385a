"""Typed rows: the schema of every JSON document lexkit writes, as dataclasses on one :class:`Row` base.

An instrument builds its rows and writes ``row.to_json()``, so the JSON on disk is exactly what it
was (same keys, same order; optional keys left out when unset); a reader turns JSON back into rows
with ``from_json`` instead of filtering nested dicts by string key::

    rows = eval_rows(report)
    best = min((r for r in rows if r.bpb is not None), key=lambda r: r.bpb)

A key an older document lacks reads as its field's default (None unless the field has one), so one
class reads every version lexkit has written (the study's results.json from schema 1 on:
tests/fixtures/results_versions). This module is the base and its two helpers; each instrument keeps
its own rows beside its measure (``lexkit.instruments.evaluate.rows``, ``.resolution.rows``,
``.principles.rows``, ``.retrieval.rows``), each study table its own (``lexkit.study.tables.*.rows``),
and the study's results.json reads as :class:`lexkit.study.schema.StudyResults`, whose cells hold them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar


@dataclasses.dataclass(frozen=True)
class Row:
    """A row: dataclass fields in JSON order. ``OPTIONAL`` fields are left out of the JSON when
    None; ``KEYS`` renames a field in the JSON (``from_`` is ``"from"``); ``NESTED`` names the row
    class of a field that holds a row or a list of rows, or (a field of ``MAPS``) an object of rows
    by name."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ()
    KEYS: ClassVar[dict[str, str]] = {}
    NESTED: ClassVar[dict[str, type[Row]]] = {}
    MAPS: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> dict[str, Any]:
        out = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None and field.name in self.OPTIONAL:
                continue
            out[self.KEYS.get(field.name, field.name)] = jsonable(value)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]):
        """The row of a JSON object; keys it does not know are ignored (a document may hold more)."""
        values = {}
        for field in dataclasses.fields(cls):
            key = cls.KEYS.get(field.name, field.name)
            if key in data:
                value = data[key]
                if field.name in cls.MAPS and value is not None:
                    value = {name: typed(cls.NESTED[field.name], v) for name, v in value.items()}
                elif field.name in cls.NESTED:
                    value = typed(cls.NESTED[field.name], value)
                values[field.name] = value
            elif field.default is not dataclasses.MISSING:
                values[field.name] = field.default
            else:
                values[field.name] = None
        return cls(**values)


def jsonable(value: Any) -> Any:
    """``value`` as JSON: a row (or the rows in a list or an object) by its ``to_json``."""
    if isinstance(value, Row):
        return value.to_json()
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return value


def typed(kind: type[Row], value: Any) -> Any:
    """The JSON ``value`` as rows of ``kind``: one row, a list of rows, or None."""
    if isinstance(value, list):
        return [kind.from_json(v) for v in value]
    return None if value is None else kind.from_json(value)
