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
    """One configuration of table G (a scheme, method or fine-tune of a run trained with the
    retrieval mix) under one pattern, on one seed's run, scored in one needle format: its rows by
    multiple and its cells by depth. (Before formats and seeds: seed 0, the ``tilde`` format.)"""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("training",)
    NESTED: ClassVar[dict[str, type[Row]]] = {"rows": ContextRow, "cells": RetrievalCell}

    label: str
    kind: str  # "scheme", "method" or "fine-tune"
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
