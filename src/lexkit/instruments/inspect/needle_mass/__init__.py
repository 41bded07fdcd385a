"""The needle mass as an instrument (:mod:`lexkit.instruments.base`): its options, :mod:`.measure`,
:mod:`.report` and :mod:`.figures`; ``lexkit inspect TARGET --needle-mass`` runs it."""

from __future__ import annotations

import dataclasses

from ...base import ON_CPU, Context, Instrument, register
from . import figures, report
from .measure import DEPTHS, SAMPLES, needle_mass_run


@dataclasses.dataclass(frozen=True)
class NeedleMassOptions:
    """The needle mass's settings: the needle options ``lexkit retrieval`` shares
    (:mod:`lexkit.cli.needle_options` declares their flags), the haystack's corpus and modifiers added."""

    task: str = "copy"
    lengths: list[int] | None = None  # default: the training length x 1-16 that hold the needle
    depths: tuple[float, ...] = DEPTHS
    samples: int = SAMPLES
    size: int | None = None
    seed: int = 0
    patterns: tuple[str, ...] = ("causal",)
    format: str | None = None
    data: str | None = None
    add: str | None = None


@register
class NeedleMass(Instrument):
    """Per layer and length: the attention of the query that predicts the answer's first token, its
    mass on the needle, its entropy against ln(keys), and where the best head's top key lies."""

    name, command, Options = "inspect.needle_mass", "inspect", NeedleMassOptions
    summary = "where a layer's attention goes when the answer is due"

    def measure(self, target, options: NeedleMassOptions, context: Context = ON_CPU) -> dict:
        return needle_mass_run(target, options.task, lengths=options.lengths, depths=options.depths,
                               samples=options.samples, size=options.size, seed=options.seed,
                               patterns=options.patterns, data=options.data, format=options.format,
                               device=context.device, progress=context.progress, add=options.add)

    def text(self, report_: dict, options: NeedleMassOptions) -> str:
        return report.text(report_)

    def csv(self, report_: dict) -> str:
        return report.csv(report_)

    def figures(self, report_: dict, path: str) -> None:
        figures.needle_mass(report_, path)
