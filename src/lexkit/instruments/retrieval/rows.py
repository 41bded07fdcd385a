"""Retrieval's typed rows: :class:`RetrievalCell` (a grid cell: task, pattern, length, depth),
:class:`RetrievalSummary` (a pattern and length over every depth) and :class:`ContextRow` (one configuration
at one multiple of its training length, retrieval beside bpb); and its report, :class:`RetrievalReport` (the
document's top level, :mod:`lexkit.documents.report`) on :class:`NeedleReport`, what it shares with the
needle mass's."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ...documents.report import key
from ...documents.rows import Row
from .. import IdentityReport


@dataclasses.dataclass(frozen=True)
class RetrievalCell(Row):
    """One cell of a retrieval grid: ``samples`` documents of a task at one length and depth,
    under one pattern (:func:`lexkit.retrieval.score`). For a task whose documents hold other
    candidates of the answer's kind (multikey, kvthread, ordinal: :meth:`lexkit.tasks.Document.candidates`),
    ``guess`` is the exact match of guessing uniformly among them (:func:`lexkit.tasks.guess_rate`) and
    ``candidate`` the share of documents whose answer is *some* candidate, right or not; None for
    other tasks and in cells scored before them."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("guess", "candidate")

    task: str
    pattern: str
    length: int
    depth: float
    samples: int
    correct: int
    accuracy: float
    low: float  # 95 % Wilson interval of the accuracy
    high: float
    answer_bits: float  # mean teacher-forced bits per answer byte
    chance_bits: float  # log2(alphabet): a uniform guess
    distance: float  # mean bytes from the needle to the answer
    tokens: float  # mean tokens the model read per document (its length in tokens)
    cached: bool  # greedy decoding ran through the KV cache
    decoded: bool = True  # exact match by greedy decoding (False: by the teacher-forced argmax)
    guess: float | None = None
    candidate: float | None = None


@dataclasses.dataclass(frozen=True)
class RetrievalSummary(Row):
    """Retrieval at one (pattern, length) over every depth: the lines of the accuracy-vs-length plot."""

    pattern: str
    length: int
    samples: int
    correct: int
    accuracy: float
    low: float
    high: float
    answer_bits: float


@dataclasses.dataclass(frozen=True)
class ContextRow(Row):
    """One configuration at one multiple of its training length: retrieval beside bpb. Where bpb was
    measured paired (:mod:`lexkit.instruments.evaluate.paired`: the same bytes at every multiple, each window opening
    on a
    byte of its document), ``ratio`` is bpb here over bpb at 1x, with its 95 % interval over the
    ``documents`` (``ratio_low``, ``ratio_high``); None at 1x and in rows measured before it."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("ratio", "ratio_low", "ratio_high", "documents")

    config: str  # the run's label (scheme, method)
    pattern: str
    multiple: int  # length / training length
    length: int
    accuracy: float  # exact match over all depths
    low: float  # 95 % Wilson interval
    high: float
    answer_bits: float
    bpb: float | None  # bits per byte of the run's validation documents at this length and pattern
    ratio: float | None = None
    ratio_low: float | None = None
    ratio_high: float | None = None
    documents: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class NeedleReport(IdentityReport):
    """What a report of needles on a grid of lengths x depths x patterns has (``lexkit retrieval``'s,
    ``lexkit inspect --needle-mass``'s): what ran, the grid's settings, as measured, and its rows."""

    target: str = key("the run directory or hf:PATH measured")
    train_len: int | None = key("the training length")
    task: str = key("the retrieval task, its canonical spec")
    format: str | None = key("the needle format asked for (a task that takes one: copy)", optional=True)
    style: str = key("the documents' kind: bytes (a lexkit run) or standard (an hf: model)")
    unit: str = key("what the lengths count: bytes or tokens")
    size: int | None = key("the needle's size asked for (null: the task's own)")
    seed: int = key("which documents")
    haystack: str | None = key("the corpus spec of the haystack (null: the task's documents need none)")
    samples: int = key("documents per length and depth")
    lengths: list[int] = key("the lengths measured, each once, in unit")
    depths: list[float] = key("the needle depths in percent, each once")
    patterns: list[str] = key("the attention patterns measured, each once")
    rows: list[dict] = key("one row per cell of the grid")


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class RetrievalReport(NeedleReport):
    """``lexkit retrieval``'s report (:func:`lexkit.retrieval.report`): every cell and the summary over depths."""

    logn: bool = key("whether log-n attention scaling ran")
    rows: list[dict] = key("one row per pattern, length and depth (RetrievalCell)")
    summary: list[dict] = key("one row per pattern and length, over every depth (RetrievalSummary)")
