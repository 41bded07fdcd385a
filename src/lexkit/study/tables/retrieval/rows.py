"""Table G's rows: its section of results.json (:class:`RetrievalSection` of
:class:`RetrievalEntry`), and one configuration's scores as its cache keeps them (:class:`Scores`)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ....documents.rows import Row
from ....instruments.retrieval.rows import ContextRow, RetrievalCell
from ...schema import StudyResults

#: table G's section of results.json
KEY = "retrieval"
#: what a configuration of table G scores (its ``origin``): a run as trained (a scheme or a layout), one of
#: table E's methods on its weights, or a fine-tune of it
TRAINED, METHOD, FINE_TUNE = ORIGINS = ("trained", "method", "fine-tune")
#: an entry's ``kind`` before schema 3, as its ``origin``
OLD_KINDS = {"scheme": TRAINED}


@dataclasses.dataclass(frozen=True)
class FormatScores(Row):
    """One configuration scored in one needle format: its rows by multiple (bpb beside them) and
    its cells by depth."""

    NESTED: ClassVar[dict[str, type[Row]]] = {"rows": ContextRow, "cells": RetrievalCell}

    rows: list[ContextRow]
    cells: list[RetrievalCell]


@dataclasses.dataclass(frozen=True)
class Scores(Row):
    """One configuration of table G scored in every format (a cache file): the scheme and log-n its
    weights ran under, the patterns (as resolved) and each format's scores."""

    NESTED: ClassVar[dict[str, type[Row]]] = {"formats": FormatScores}
    MAPS: ClassVar[tuple[str, ...]] = ("formats",)

    scheme: str
    logn: bool
    patterns: list[str]
    formats: dict[str, FormatScores]


@dataclasses.dataclass(frozen=True)
class RetrievalEntry(Row):
    """One configuration of table G (a run trained with the retrieval mix, as trained or under one of
    table E's methods or fine-tunes: its ``origin``) under one pattern, on one seed's run, scored in
    one needle format: its rows by multiple and its cells by depth. (Before formats and seeds: seed 0,
    the ``tilde`` format; before schema 3 of results.json, ``kind`` where ``origin`` is, ``"scheme"``
    for a run as trained, scheme or layout: :meth:`from_json` reads it.)"""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("training",)
    NESTED: ClassVar[dict[str, type[Row]]] = {"rows": ContextRow, "cells": RetrievalCell}

    label: str
    origin: str  # ORIGINS: "trained" (the run as trained), "method" or "fine-tune" (table E's)
    scheme: str
    logn: bool
    pattern: str
    run: str
    rows: list[ContextRow]
    cells: list[RetrievalCell]
    seed: int = 0
    format: str = "tilde"  # the needle format (lexkit.tasks.needles)
    held_out: bool = False  # whether that format is held out from training
    training: str | None = None  # how its run trained beyond the recipe (a layout, a token shift, steps)

    @classmethod
    def from_json(cls, data: dict) -> RetrievalEntry:
        """The entry of any version's JSON: before schema 3, ``kind`` (``"scheme"`` for ``"trained"``)."""
        if "origin" not in data and "kind" in data:
            data = {**data, "origin": OLD_KINDS.get(data["kind"], data["kind"])}
        return super().from_json(data)


@dataclasses.dataclass(frozen=True)
class RetrievalSection(Row):
    """Table G: the recipe its runs trained with, the grid it scored, and every configuration."""

    NESTED: ClassVar[dict[str, type[Row]]] = {"configs": RetrievalEntry}

    task: str
    size: int
    train_len: int
    preset: str
    steps: int
    batch: int
    lr: float
    mix: str
    seeds: int
    multiples: list[int]
    bpb_multiples: list[int]
    depths: list[float]
    samples: int
    finetune_steps: int
    configs: list[RetrievalEntry]
    formats: list[str] | None = None  # the trained needle formats scored (None: the tilde format alone)
    held_out: list[str] | None = None  # the held-out needle formats scored


def section(doc: StudyResults) -> RetrievalSection | None:
    """Table G of a study (None when it did not run)."""
    return doc.table(KEY)
