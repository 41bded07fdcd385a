"""Typed reports: an instrument's report as a dataclass that still reads as the JSON-ready mapping it was.

A :class:`Report`'s fields are its document's top-level keys, typed, each with a one-line doc
(:func:`key`); it reads as a read-only mapping too (``report["lengths"]``, ``get``, ``keys``, ``items``,
``in``, iteration, ``dict(report)``, ``==`` with a dict), as transformers' ``ModelOutput`` is both a
dataclass and a dict, so a reader of the dict it replaced keeps working. Unlike ``ModelOutput`` (whose keys
are its fields that are not None), a report's keys are the keywords it was made with, in that order: a
key may hold null (``"stride": null``), an optional key the report leaves out is not a key (its attribute
reads its default, None), and the JSON it writes (:meth:`Report.to_json`) has the keys, order and values
of the dict it replaced, byte for byte. :meth:`Report.from_json` reads a document back (an unknown key is a
ValueError naming it and the valid keys). A field made with :func:`aside` is no key: what only the text or
the figure reads (resolution's ``view``), never written.

Every report opens with the header (:func:`lexkit.core.version.header`): :class:`Report`'s own three
fields. Each instrument declares its report beside its rows (``EvalReport`` in
:mod:`lexkit.instruments.evaluate.rows`, ...)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping
from typing import Any

from .rows import jsonable


def key(doc: str, *, optional: bool = False) -> Any:
    """A report's key: ``doc``, what it holds, in one line; ``optional``: a report may leave it out (its
    attribute then reads None)."""
    return dataclasses.field(default=None if optional else dataclasses.MISSING, metadata={"doc": doc})


def aside(doc: str) -> Any:
    """A field that is no key of the document: what the text or the figure reads besides it, never written."""
    return dataclasses.field(default=None, repr=False, compare=False, metadata={"doc": doc, "aside": True})


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class Report(Mapping):
    """A typed report (module docstring): made with its keys as keywords, in the order its JSON writes them. A
    subclass is a ``@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)`` (equal to a mapping of the same
    keys and values, as a dict is) whose fields are made with :func:`key` (or :func:`aside`)."""

    report: str = key("which report this is (``lexkit.eval``)")
    report_version: int = key("the version of this report's layout")
    lexkit_version: str = key("the lexkit that wrote it")

    def __new__(cls, *args: Any, **keys: Any) -> Report:
        if args:
            raise TypeError(f"{cls.__name__} takes its keys as keywords, in the order its JSON writes them")
        self = super().__new__(cls)
        names = cls.key_names()
        object.__setattr__(self, "_keys", tuple(name for name in keys if name in names))
        return self

    @classmethod
    @functools.cache
    def key_names(cls) -> tuple[str, ...]:
        """Every key a report of this class may have (its fields but the :func:`aside` ones)."""
        return tuple(f.name for f in dataclasses.fields(cls) if not f.metadata.get("aside"))

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Report:
        """The report of a JSON document (or a mapping of its keys), in the document's order; ValueError
        naming a key this report does not have (with the valid ones) or one it needs that ``doc`` lacks."""
        names = cls.key_names()
        unknown = [name for name in doc if name not in names]
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown key {unknown[0]!r} (valid keys: {', '.join(names)})")
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in doc and f.name in names
                   and f.default is dataclasses.MISSING]
        if missing:
            raise ValueError(f"{cls.__name__}: the document has no {', '.join(map(repr, missing))}")
        return cls(**doc)

    def to_json(self) -> dict[str, Any]:
        """The JSON document: every key in order, a typed row in it by its own ``to_json``."""
        return {name: jsonable(getattr(self, name)) for name in self._keys}

    def __getitem__(self, name: str) -> Any:
        if name not in self._keys:
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)
