"""The evaluation as an instrument (:mod:`lexkit.instruments.base`): bits per byte of a run or an hf:
model at many lengths and patterns (:mod:`.measure`, the paper's protocol), its :mod:`.report` and
:mod:`.figures`; ``lexkit eval`` runs it. ``lexkit.evaluate`` is its measure under the name users
import, callable. Its settings are :class:`EvalOptions`, each field its flag and its bound
(:mod:`lexkit.core.options`), checked by the command and by the library alike."""

from __future__ import annotations

import dataclasses

from ...attention import KERNELS, pattern_help
from ...core import checks
from ...core import options as declared
from ...core.options import setting
from ...core.specs import parse_lengths
from ...layouts import check_pattern, check_scheme
from ..base import ON_CPU, Context, Instrument, register
from . import figures
from . import report as reports
from .measure import STARTS, check_start, check_stream_value, evaluate_run
from .rows import EvalReport

#: the argument group of the flags that only an hf:PATH model reads (eval and resolution)
HF_GROUP = "Hugging Face models (hf:PATH; needs pip install -e '.[hf]')"
#: the hf: settings eval and resolution share: RoPE scaling through the config, the weights' dtype
ROPE_SCALING = {"type": str, "metavar": "SPEC", "group": HF_GROUP, "help": "RoPE scaling through the model's "
                "config: TYPE:FACTOR (linear:2, dynamic:2, yarn:4), TYPE:key=value,... or a JSON object, on every "
                "layer with RoPE; SELECTOR=SPEC for the layers a selector names (global=yarn:4)"}
DTYPE = {"type": str, "metavar": "DTYPE", "group": HF_GROUP, "help": "float32 (default), bfloat16 or float16"}


def check_patterns(name: str, specs) -> None:
    """Each attention pattern's syntax and parameter values (before any model loads)."""
    for spec in [specs] if isinstance(specs, str) else specs:
        check_pattern(spec)


@dataclasses.dataclass(frozen=True)
class EvalOptions:
    """The evaluation's settings, :func:`.measure.evaluate_run`'s keywords; each field is a flag of ``lexkit eval``
    (:mod:`lexkit.core.options`), checked by :meth:`check` there and in the library."""

    lengths: list[int] | None = setting(
        None, "comma-separated lengths in bytes (default: the training length x 1/2, 1, 2, 4, 8, 16)",
        metavar="L,L,...", parse=parse_lengths, check=declared.bounded_lengths(checks.MAX_EVAL_LENGTH))
    patterns: tuple[str, ...] = setting(
        ("causal",), lambda: pattern_help(default="causal", repeatable=True, selectors=True), flag="--pattern",
        metavar="SPEC", check=check_patterns)
    data: str | None = setting(
        None, "evaluate on these documents: stdlib (its validation split), a file, directory or glob, "
        "or hf:NAME[:CONFIG[:SPLIT]] (all of their documents); default: the run's own validation split",
        type=str, metavar="SPEC")
    stride: int | None = setting(None, "sliding windows advancing by S bytes (default: non-overlapping chunks)",
                                 type=int, metavar="S")
    start: str | None = setting(
        None, "what a window's first token is: bos (the paper's protocol as lexkit runs it: each "
        "document's first window opens on its BOS) or text (every window opens on a byte of the "
        "document, as a training window does; scores bytes 1..M). Default: bos, text with --paired",
        type=str, choices=STARTS)
    paired: bool = setting(
        False, "use of context: each longer length's bpb over the shortest's on the same bytes with the "
        "start held fixed (--start text), with its 95 %% interval over documents (docs/evaluation.md)")
    max_docs: int | None = setting(None, "use at most N documents", type=int, metavar="N")
    max_bytes: int | None = setting(None, "score at most about N bytes per length (at least one document)",
                                    type=int, metavar="N")
    batch_size: int | None = setting(None, "windows per forward pass (default: by length, 8192 inputs on CPU)",
                                     type=int, metavar="N")
    kernel: str = setting("auto", "attention kernel (default: auto)", choices=KERNELS)
    scheme: str | None = setting(
        None, "evaluate the trained weights under another scheme with the same tensors, no retraining "
        "(e.g. rope:scaling=yarn,factor=4, rerope:w=64; original_len and w default to the training length)",
        type=str, metavar="SPEC", check=lambda name, spec: check_scheme(spec))
    logn: bool | None = setting(None, "log-n attention scaling at evaluation (default: as the run trained)", type=bool)
    add: str | None = setting(
        None, "score the trained weights with layer modifiers that hold no learned state added, no "
        "retraining: topk:4 (every layer), global=topk:4, L1=softcap:30;local=adaptive (lexkit layouts "
        "lists them)", type=str, metavar="[SELECTOR=]MODIFIER")
    stream: bool | str = setting(
        "auto", "feed each window in segments through a KV cache trimmed to the pattern's reach (memory flat in "
        "the length); default: auto, streaming under window/bca past one segment (4096 tokens)", type=bool)
    rope_scaling: str | dict | None = dataclasses.field(default=None, metadata=ROPE_SCALING)
    dtype: str | None = dataclasses.field(default=None, metadata=DTYPE)
    max_tokens: int | None = setting(None, "score at most about N tokens per length", type=int, metavar="N",
                                     group=HF_GROUP)

    def starts(self) -> str:
        """What a window's first token is: ``start``, else bos (text with ``paired``)."""
        return self.start or ("text" if self.paired else "bos")

    def check(self) -> EvalOptions:
        """ValueError naming the flag of the first setting no evaluation can take (each field's bound, choices
        and syntax; the ones :func:`.measure.evaluate` pins by message first), and what ``paired`` needs."""
        check_start(self.starts())
        check_stream_value(self.stream)
        declared.check(self)
        if self.paired and self.starts() != "text":
            raise ValueError(f"--paired compares lengths with the start held fixed: it runs under --start text, "
                             f"not --start {self.start}")
        if self.paired and self.stride is not None:
            raise ValueError("--paired scores non-overlapping windows: leave out --stride")
        if self.paired and self.lengths is not None and len(parse_lengths(self.lengths)) < 2:
            raise ValueError("--paired compares each longer length with the shortest: give two lengths or more")
        return self

    def keywords(self) -> dict:
        """:func:`.measure.evaluate_run`'s keywords (the start resolved): the fields declared here, not a
        subclass's own (an instrument that adds a setting reads it itself)."""
        return {**{field.name: getattr(self, field.name) for field in dataclasses.fields(EvalOptions)},
                "start": self.starts()}


@register
class Evaluate(Instrument):
    """Bits per byte at many lengths and attention patterns, by position, and paired use of context."""

    name, command, Options, Report = "eval", "eval", EvalOptions, EvalReport
    summary = "bits per byte of a run at many lengths and patterns"

    def measure(self, target, options: EvalOptions, context: Context = ON_CPU) -> EvalReport:
        return evaluate_run(target, **options.keywords(), device=context.device, progress=context.progress)

    def text(self, report: EvalReport, options: EvalOptions) -> str:
        return reports.text(report)

    def csv(self, report: EvalReport) -> str:
        return reports.csv_text(report)

    def figures(self, report: EvalReport, path: str) -> None:
        figures.eval_report(report, path)
