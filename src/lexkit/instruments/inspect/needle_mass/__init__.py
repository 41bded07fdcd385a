"""The needle mass as an instrument (:mod:`lexkit.instruments.base`): its options, :mod:`.measure`,
:mod:`.report` and :mod:`.figures`; ``lexkit inspect TARGET --needle-mass`` runs it."""

from __future__ import annotations

import dataclasses

from ....core import options as declared
from ....core.options import setting
from ...base import ON_CPU, Context, Instrument, register
from ...retrieval import RetrievalOptions, parse_depths
from . import figures
from . import report as reports
from .measure import DEPTHS, SAMPLES, NeedleMassReport, needle_mass_run


def _retrievals(name: str) -> dict:
    """The metadata of retrieval's needle field ``name`` (its help names no command's default): the flag
    ``lexkit inspect --needle-mass`` shares with ``lexkit retrieval``, one declaration for both."""
    return dict(next(f for f in dataclasses.fields(RetrievalOptions) if f.name == name).metadata)


@dataclasses.dataclass(frozen=True)
class NeedleMassOptions:
    """The needle mass's settings, each a flag of ``lexkit inspect --needle-mass``: the needle flags of
    ``lexkit retrieval`` (their help shared where it names no default) with the needle mass's own defaults,
    the haystack's corpus and the modifiers added (``--data`` and ``--add``, which the command declares
    once for both of its tables). Checked by :meth:`check` in the command and in the library."""

    task: str = setting("copy", "a retrieval task of `lexkit tasks`, its parameters after a colon; the answer's "
                        "first token is the query measured (default: copy)", metavar="SPEC")
    lengths: list[int] | None = dataclasses.field(default=None, metadata=_retrievals("lengths"))
    depths: tuple[float, ...] = setting(
        DEPTHS, f"needle depths in percent, 0..100 (default: {','.join(f'{d:g}' for d in DEPTHS)})",
        metavar="D,D,...", parse=parse_depths)
    samples: int = setting(SAMPLES, f"documents per length and depth (default: {SAMPLES})", metavar="N")
    size: int | None = dataclasses.field(default=None, metadata=_retrievals("size"))
    seed: int = dataclasses.field(default=0, metadata=_retrievals("seed"))
    patterns: tuple[str, ...] = dataclasses.field(default=("causal",), metadata=_retrievals("patterns"))
    format: str | None = dataclasses.field(default=None, metadata=_retrievals("format"))
    data: str | None = setting(None, type=str, flag=False)
    add: str | None = setting(None, type=str, flag=False)

    def check(self) -> NeedleMassOptions:
        """ValueError naming the flag of the first setting out of range (counts, the seed, lengths); the
        task, depths and patterns are checked with the grid, before any model loads."""
        declared.check(self)
        return self


@register
class NeedleMass(Instrument):
    """Per layer and length: the attention of the query that predicts the answer's first token, its
    mass on the needle, its entropy against ln(keys), and where the best head's top key lies."""

    name, command, Options, Report = "inspect.needle_mass", "inspect", NeedleMassOptions, NeedleMassReport
    summary = "where a layer's attention goes when the answer is due"

    def measure(self, target, options: NeedleMassOptions, context: Context = ON_CPU) -> NeedleMassReport:
        options.check()
        return needle_mass_run(target, options.task, lengths=options.lengths, depths=options.depths,
                               samples=options.samples, size=options.size, seed=options.seed,
                               patterns=options.patterns, data=options.data, format=options.format,
                               device=context.device, progress=context.progress, add=options.add)

    def text(self, report: NeedleMassReport, options: NeedleMassOptions) -> str:
        return reports.text(report)

    def csv(self, report: NeedleMassReport) -> str:
        return reports.csv(report)

    def figures(self, report: NeedleMassReport, path: str) -> None:
        figures.needle_mass(report, path)
