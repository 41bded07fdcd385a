"""Typed result rows: what one evaluation or resolution cell holds, with ``to_json()``.

The instruments build their rows here and write ``row.to_json()``, so the JSON on disk is
exactly what it was (same keys, same order; optional keys left out when unset) and its schema
lives in one place. A reader turns a report's rows back into objects with ``from_json`` (or
:func:`eval_rows`) instead of filtering nested dicts by hand::

    rows = eval_rows(report)
    best = min((r for r in rows if r.bpb is not None), key=lambda r: r.bpb)
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar


@dataclasses.dataclass(frozen=True)
class Row:
    """A row: dataclass fields in JSON order; ``OPTIONAL`` fields are left out of the JSON when
    None; ``KEYS`` renames a field in the JSON (``from_`` is ``"from"``)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ()
    KEYS: ClassVar[dict[str, str]] = {}

    def to_json(self) -> dict[str, Any]:
        out = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None and field.name in self.OPTIONAL:
                continue
            out[self.KEYS.get(field.name, field.name)] = value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Row:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{name: data.get(cls.KEYS.get(name, name)) for name in names})


@dataclasses.dataclass(frozen=True)
class EvalRow(Row):
    """One (length, pattern) cell of an evaluation: bits per byte, perplexity (per token), the
    bytes (and, for a tokenizer model, tokens) scored; ``unavailable`` says why a cell could not run;
    ``kernel`` the attention kernel that actually ran (``dense``, ``chunked``, ``flex``, a smaller
    flex rung such as ``flex:128x64/2``; joined by ``+`` when several did)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("tokens", "unavailable", "kernel")

    length: int
    pattern: str
    stride: int
    streamed: bool
    bpb: float | None
    ppl: float | None
    tokens: int | None = None
    bytes: int = 0
    unavailable: str | None = None
    kernel: str | None = None


@dataclasses.dataclass(frozen=True)
class PositionRow(Row):
    """bpb of the window indices ``from_ <= p < to`` at one (length, pattern)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("tokens",)
    KEYS: ClassVar[dict[str, str]] = {"from_": "from"}

    length: int
    pattern: str
    from_: int
    to: int
    beyond_train: bool | None
    bpb: float
    tokens: int | None = None
    bytes: int = 0


@dataclasses.dataclass(frozen=True)
class ResolutionRow(Row):
    """One length of an analytic or empirical resolution document (``note``: why R is n/a)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("note",)

    scheme: str | None
    length: int
    pattern: str
    resolution: float | None
    per_head: list | None
    per_layer: list | None
    entropy: float | None
    note: str | None = None


def eval_rows(report: dict) -> list[EvalRow]:
    """The ``results`` of an evaluation report (a JSON file's or a live one's) as rows."""
    return [EvalRow.from_json(r) for r in report["results"]]


def position_rows(report: dict) -> list[PositionRow]:
    """The ``by_position`` buckets of an evaluation report as rows."""
    return [PositionRow.from_json(r) for r in report["by_position"]]
