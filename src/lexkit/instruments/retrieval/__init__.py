"""Retrieval at distance as an instrument (:mod:`lexkit.instruments.base`): exact match and answer bits of
needles on a grid of lengths x depths x patterns, its measure in rooms of one job each (:mod:`.grid`: the
documents; :mod:`.scoring`: a model on them; :mod:`.cells`: the grid's cells and their summary;
:mod:`.context`: retrieval beside bpb, paired) joined by :mod:`.measure` (``lexkit retrieval`` end to end,
its report), its :mod:`.report` and :mod:`.figures`. ``lexkit.retrieval`` is its measure under the name users
import."""

from __future__ import annotations

import dataclasses

from ...attention import KERNELS, pattern_help
from ...core import checks
from ...core import options as declared
from ...core.options import setting
from ...core.specs import parse_lengths
from ...tasks import needles
from ..base import ON_CPU, Context, Instrument, register
from . import figures
from . import report as reports
from .grid import DEFAULT_DEPTHS
from .measure import retrieval_run
from .rows import RetrievalReport


def parse_depths(text: str) -> list[float]:
    """``"0,50,100"`` -> ``[0.0, 50.0, 100.0]`` (the range is checked where the documents are made)."""
    values = []
    for item in (item.strip() for item in text.split(",")):
        try:
            values.append(float(item))
        except ValueError:
            raise ValueError(f"--depths: {item!r} is not a number (give percents such as 0,50,100)") from None
    return values


def format_help() -> str:
    """--format's help, naming the formats registered now (with what ``--import`` added)."""
    return (f"the needle format of --task copy: trained ({', '.join(needles.trained())}; default tilde) or held "
            f"out ({', '.join(needles.held_out_formats())}); `lexkit tasks` lists them")


@dataclasses.dataclass(frozen=True)
class RetrievalOptions:
    """Retrieval's settings, :func:`.measure.retrieval_run`'s keywords; each field is a flag of ``lexkit retrieval``
    (:mod:`lexkit.core.options`; ``lexkit inspect --needle-mass`` shares the needle flags whose help names no
    default, :class:`lexkit.instruments.inspect.needle_mass.NeedleMassOptions`), checked by :meth:`check` there
    and in the library."""

    task: str = setting(
        "passkey", "a retrieval task of `lexkit tasks`, its parameters after a colon (copy, passkey, multikey, "
        "induction, kvthread, ordinal, or one --import registers): kvthread:hops=3,direction=backward, "
        "ordinal:count=6,which=2 (default: passkey)", metavar="SPEC")
    format: str | None = setting(None, format_help, type=str, metavar="NAME")
    lengths: list[int] | None = setting(  # default: the training length x 1-16 that hold the needle
        None, "document lengths in the model's unit: bytes for a lexkit run, tokens for hf: (default: the "
        "training length x 1, 2, 4, 8, 16, those long enough for the needle)", metavar="L,L,...",
        parse=parse_lengths, check=declared.bounded_lengths(checks.MAX_EVAL_LENGTH))
    depths: tuple[float, ...] = setting(
        DEFAULT_DEPTHS, f"needle depths in percent, 0..100 (default: {','.join(f'{d:g}' for d in DEFAULT_DEPTHS)})",
        metavar="D,D,...", parse=parse_depths)
    samples: int = setting(10, "documents per length and depth (default: 10)", metavar="N")
    size: int | None = setting(
        None, "letters of a copy segment / digits of a key / symbols of a kvthread hash or an ordinal value "
        "(default: the task's, `lexkit tasks`)", type=int, metavar="N")
    seed: int = setting(0, "which documents (default: 0)", metavar="S", minimum=0)
    patterns: tuple[str, ...] = setting(
        ("causal",), lambda: pattern_help(default="causal", repeatable=True, selectors=True), flag="--pattern",
        metavar="SPEC")
    data: str | None = setting(
        None, "haystack of the byte tasks: a corpus spec whose validation documents are the filler "
        "(default: the run's own corpus; stdlib for hf:)", type=str, metavar="SPEC")
    scheme: str | None = setting(
        None, "score the trained weights under another scheme with the same tensors (as `lexkit eval`)",
        type=str, metavar="SPEC")
    logn: bool | None = setting(None, "log-n attention scaling (default: as the run trained)", type=bool)
    add: str | None = setting(
        None, "score the trained weights with layer modifiers that hold no learned state added, no "
        "retraining: topk:4 (every layer), global=topk:4, L1=softcap:30;local=adaptive (lexkit layouts "
        "lists them)", type=str, metavar="[SELECTOR=]MODIFIER")
    rope_scaling: str | dict | None = setting(
        None, "hf: models: RoPE scaling through the config (yarn:4, ...)", type=str, metavar="SPEC")
    cache: bool | None = setting(
        None, "greedy decoding through the KV cache (default: where the pattern allows it)", type=bool)
    kernel: str = setting("auto", "attention kernel (default: auto)", choices=KERNELS)

    def check(self) -> RetrievalOptions:
        """ValueError naming the flag of the first setting out of range (counts, the seed, lengths at most
        :data:`lexkit.core.checks.MAX_EVAL_LENGTH`, the kernel); the task, depths and patterns are checked
        with the grid (:func:`.grid.check_grid`), before any model loads."""
        declared.check(self)
        return self


@register
class Retrieval(Instrument):
    """Exact match of needles at distance per (pattern, length, depth), with its interval and answer bits."""

    name, command, Options, Report = "retrieval", "retrieval", RetrievalOptions, RetrievalReport
    summary = "exact match of needles at distance (copy, passkey, kvthread, ...)"

    def measure(self, target, options: RetrievalOptions, context: Context = ON_CPU) -> RetrievalReport:
        values = dataclasses.asdict(options)
        return retrieval_run(target, values.pop("task"), **values, device=context.device, progress=context.progress)

    def text(self, report: RetrievalReport, options: RetrievalOptions) -> str:
        return reports.text(report)

    def csv(self, report: RetrievalReport) -> str:
        return reports.csv_text(report)

    def figures(self, report: RetrievalReport, path: str) -> None:
        figures.retrieval(report, path)
