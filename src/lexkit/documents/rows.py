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
        for name, key, nested, is_map, default in _reading(cls):
            if key in data:
                value = data[key]
                if is_map and value is not None:
                    value = {k: typed(nested, v) for k, v in value.items()}
                elif nested is not None:
                    value = typed(nested, value)
                values[name] = value
            else:
                values[name] = default
        return cls(**values)


def _reading(cls: type[Row]) -> tuple[tuple[str, str, type[Row] | None, bool, Any], ...]:
    """How ``cls.from_json`` reads each field: (name, JSON key, nested row class or None, an object of rows
    by name, the value of a missing key). Worked out once a class (a study's results.json holds tens of
    thousands of rows; ``dataclasses.fields`` and the class's tables per row were most of reading it)."""
    plan = cls.__dict__.get("_READING")
    if plan is None:
        plan = tuple((f.name, cls.KEYS.get(f.name, f.name), cls.NESTED.get(f.name), f.name in cls.MAPS,
                      None if f.default is dataclasses.MISSING else f.default) for f in dataclasses.fields(cls))
        type.__setattr__(cls, "_READING", plan)
    return plan


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
