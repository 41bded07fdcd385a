"""The evaluation as an instrument (:mod:`lexkit.instruments.base`): bits per byte of a run or an hf:
model at many lengths and patterns (:mod:`.measure`, the paper's protocol), its :mod:`.report` and
:mod:`.figures`; ``lexkit eval`` runs it. ``lexkit.evaluate`` is its measure under the name users
import, callable."""

from __future__ import annotations

import dataclasses

from ..base import ON_CPU, Context, Instrument, register
from . import figures, report
from .measure import evaluate_run


@dataclasses.dataclass(frozen=True)
class EvalOptions:
    """The evaluation's settings, :func:`.measure.evaluate_run`'s keywords (``lexkit eval``'s flags;
    its help says what each means)."""

    lengths: list[int] | None = None
    patterns: tuple[str, ...] = ("causal",)
    data: str | None = None
    stride: int | None = None
    max_docs: int | None = None
    max_bytes: int | None = None
    max_tokens: int | None = None
    batch_size: int | None = None
    kernel: str = "auto"
    scheme: str | None = None
    logn: bool | None = None
    stream: bool | str = "auto"
    rope_scaling: str | None = None
    dtype: str | None = None
    start: str = "bos"
    paired: bool = False
    add: str | None = None


@register
class Evaluate(Instrument):
    """Bits per byte at many lengths and attention patterns, by position, and paired use of context."""

    name, command, Options = "eval", "eval", EvalOptions
    summary = "bits per byte of a run at many lengths and patterns"

    def measure(self, target, options: EvalOptions, context: Context = ON_CPU) -> dict:
        return evaluate_run(target, **dataclasses.asdict(options), device=context.device, progress=context.progress)

    def text(self, report_: dict, options: EvalOptions) -> str:
        return report.text(report_)

    def csv(self, report_: dict) -> str:
        return report.csv_text(report_)

    def figures(self, report_: dict, path: str) -> None:
        figures.eval_report(report_, path)
