"""Table E's rows: its section of results.json (:class:`ExtensionSection`), and one configuration's
evaluation as its cache keeps it (:class:`Evaluated`)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ....documents.rows import Row
from ....instruments.evaluate.rows import EvalRow
from ...schema import StudyResults

#: table E's section of results.json
KEY = "extension"


@dataclasses.dataclass(frozen=True)
class Evaluated(Row):
    """One configuration evaluated (:func:`lexkit.evaluate.evaluate`, whose whole report the cache
    keeps): the patterns it ran under, as resolved, and its rows."""

    NESTED: ClassVar[dict[str, type[Row]]] = {"results": EvalRow}

    patterns: list[str]
    results: list[EvalRow]


@dataclasses.dataclass(frozen=True)
class Finetuned(Row):
    """How a configuration of table E was fine-tuned: its run, length, steps and learning rate."""

    run: str
    train_len: int
    steps: int
    lr: float


@dataclasses.dataclass(frozen=True)
class ExtensionRow(Row):
    """One context-extension configuration of table E under one pattern, on one seed's rope run."""

    NESTED: ClassVar[dict[str, type[Row]]] = {"finetune": Finetuned, "results": EvalRow}

    label: str
    scheme: str
    pattern: str
    logn: bool
    finetune: Finetuned | None
    seed: int
    results: list[EvalRow]


@dataclasses.dataclass(frozen=True)
class ExtensionSection(Row):
    """Table E: every scaling set for ``factor`` (longest / training length), fine-tunes of
    ``finetune_steps`` steps at ``finetune_len``."""

    NESTED: ClassVar[dict[str, type[Row]]] = {"rows": ExtensionRow}

    factor: float
    finetune_len: int
    finetune_steps: int
    rows: list[ExtensionRow]


def section(doc: StudyResults) -> ExtensionSection | None:
    """Table E of a study (None when it did not run)."""
    return doc.table(KEY)
