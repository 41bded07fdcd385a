"""Retrieval at distance as an instrument (:mod:`lexkit.instruments.base`): exact match and answer bits of
needles on a grid of lengths x depths x patterns (:mod:`.measure`), its :mod:`.report` and :mod:`.figures`;
``lexkit retrieval`` runs it. ``lexkit.retrieval`` is its measure under the name users import."""

from __future__ import annotations

import dataclasses

from ..base import ON_CPU, Context, Instrument, register
from . import figures, report
from .measure import DEFAULT_DEPTHS, retrieval_run


@dataclasses.dataclass(frozen=True)
class RetrievalOptions:
    """Retrieval's settings, :func:`.measure.retrieval_run`'s keywords (``lexkit retrieval``'s flags: the
    needle options it shares with ``lexkit inspect --needle-mass``, :mod:`lexkit.cli.needle_options`)."""

    task: str = "passkey"
    lengths: list[int] | None = None  # default: the training length x 1-16 that hold the needle
    depths: tuple[float, ...] = DEFAULT_DEPTHS
    samples: int = 10
    size: int | None = None
    seed: int = 0
    patterns: tuple[str, ...] = ("causal",)
    format: str | None = None
    data: str | None = None
    scheme: str | None = None
    logn: bool | None = None
    add: str | None = None
    rope_scaling: str | None = None
    cache: bool | None = None
    kernel: str = "auto"


@register
class Retrieval(Instrument):
    """Exact match of needles at distance per (pattern, length, depth), with its interval and answer bits."""

    name, command, Options = "retrieval", "retrieval", RetrievalOptions
    summary = "exact match of needles at distance (copy, passkey, kvthread, ...)"

    def measure(self, target, options: RetrievalOptions, context: Context = ON_CPU) -> dict:
        values = dataclasses.asdict(options)
        return retrieval_run(target, values.pop("task"), **values, device=context.device, progress=context.progress)

    def text(self, report_: dict, options: RetrievalOptions) -> str:
        return report.text(report_)

    def csv(self, report_: dict) -> str:
        return report.csv_text(report_)

    def figures(self, report_: dict, path: str) -> None:
        figures.retrieval(report_, path)
