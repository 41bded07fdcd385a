"""The byte table as an instrument (:mod:`lexkit.instruments.base`): its options, :mod:`.measure`,
:mod:`.report` and :mod:`.figures`; ``lexkit inspect RUN`` runs it."""

from __future__ import annotations

import dataclasses

from ...base import ON_CPU, Context, Instrument, register
from . import figures
from . import report as reports
from .measure import COLLAPSED, UNSEEN_BY, BytesReport, embedding_run


@dataclasses.dataclass(frozen=True)
class BytesOptions:
    """The byte table's settings (each a flag of ``lexkit inspect``; ``data`` is the command's shared --data)."""

    top: int | None = dataclasses.field(default=None, metadata={
        "type": int, "metavar": "N", "help": f"the seen bytes of highest cosine printed (default {COLLAPSED})"})
    all: bool = dataclasses.field(default=False, metadata={"help": "print every byte, not the top N"})
    steps: int | None = dataclasses.field(default=None, metadata={
        "type": int, "metavar": "N", "help": "replay only the first N training steps (default: every step the "
        "weights trained)"})
    unseen_by: str | None = dataclasses.field(default=None, metadata={
        "type": str, "choices": UNSEEN_BY, "help": "unseen means absent from every replayed training window "
        "(training, the default) or from the corpus's text (corpus: a --mix may show bytes the corpus never holds)"})
    data: str | None = dataclasses.field(default=None, metadata={"type": str, "flag": False})


@register
class Bytes(Instrument):
    """Per byte value (and BOS): its count in the run's training corpus, the times training showed it,
    its embedding row norm and its cosine to the mean row of the bytes training never showed."""

    name, command, Options, Report = "inspect.bytes", "inspect", BytesOptions, BytesReport
    summary = "the byte table: counts, embedding norms, collapse"
    targets = "a run directory written by `lexkit train`"

    def measure(self, target, options: BytesOptions, context: Context = ON_CPU) -> BytesReport:
        return embedding_run(target, data=options.data, steps=options.steps,
                             top=COLLAPSED if options.top is None else options.top,
                             unseen_by=options.unseen_by or "training", progress=context.progress)

    def text(self, report: BytesReport, options: BytesOptions) -> str:
        return reports.text(report, every=bool(options.all))

    def csv(self, report: BytesReport) -> str:
        return reports.csv(report)

    def figures(self, report: BytesReport, path: str) -> None:
        figures.embedding(report, path)
