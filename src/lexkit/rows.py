"""Typed rows: the schema of every JSON document lexkit writes, as dataclasses on one :class:`Row` base.

An instrument builds its rows here and writes ``row.to_json()``, so the JSON on disk is exactly
what it was (same keys, same order; optional keys left out when unset); a reader turns JSON back
into rows with ``from_json`` instead of filtering nested dicts by string key::

    rows = eval_rows(report)
    best = min((r for r in rows if r.bpb is not None), key=lambda r: r.bpb)

A key an older document lacks reads as its field's default (None unless the field has one), so one
class reads every version lexkit has written (the study's results.json from schema 1 on:
tests/fixtures/results_versions). The rows, from the instruments up:

* evaluation: :class:`EvalRow` (one length and pattern), :class:`PositionRow` (loss by position);
* resolution: :class:`ResolutionRow` (the resolution command's analytic R), :class:`EmpiricalRow`
  (measured per layer and head), :class:`AnalyticRow` (the study's analytic R);
* principles: :class:`PrinciplesRow`;
* retrieval: :class:`RetrievalCell` (a grid cell: task, pattern, length, depth),
  :class:`RetrievalSummary` (a pattern and length over every depth), :class:`ContextRow` (one
  configuration at one multiple of its training length, retrieval beside bpb);
* the study's results.json reads as :class:`lexkit.study.schema.StudyResults`, whose cells hold
  these rows.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar


@dataclasses.dataclass(frozen=True)
class Row:
    """A row: dataclass fields in JSON order. ``OPTIONAL`` fields are left out of the JSON when
    None; ``KEYS`` renames a field in the JSON (``from_`` is ``"from"``); ``NESTED`` names the row
    class of a field that holds a row or a list of rows, or (a field of ``MAPS``) an object of rows
    by name."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ()
    KEYS: ClassVar[dict[str, str]] = {}
    NESTED: ClassVar[dict[str, type[Row]]] = {}
    MAPS: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> dict[str, Any]:
        out = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None and field.name in self.OPTIONAL:
                continue
            out[self.KEYS.get(field.name, field.name)] = jsonable(value)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]):
        """The row of a JSON object; keys it does not know are ignored (a document may hold more)."""
        values = {}
        for field in dataclasses.fields(cls):
            key = cls.KEYS.get(field.name, field.name)
            if key in data:
                value = data[key]
                if field.name in cls.MAPS and value is not None:
                    value = {name: typed(cls.NESTED[field.name], v) for name, v in value.items()}
                elif field.name in cls.NESTED:
                    value = typed(cls.NESTED[field.name], value)
                values[field.name] = value
            elif field.default is not dataclasses.MISSING:
                values[field.name] = field.default
            else:
                values[field.name] = None
        return cls(**values)


def jsonable(value: Any) -> Any:
    """``value`` as JSON: a row (or the rows in a list or an object) by its ``to_json``."""
    if isinstance(value, Row):
        return value.to_json()
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return value


def typed(kind: type[Row], value: Any) -> Any:
    """The JSON ``value`` as rows of ``kind``: one row, a list of rows, or None."""
    if isinstance(value, list):
        return [kind.from_json(v) for v in value]
    return None if value is None else kind.from_json(value)


# -- evaluation ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class EvalRow(Row):
    """One (length, pattern) cell of an evaluation: bits per byte, perplexity (per token), the
    bytes (and, for a tokenizer model, tokens) scored; ``unavailable`` says why a cell could not run;
    ``kernel`` the attention kernel that actually ran (``dense``, ``chunked``, ``flex``, a smaller
    flex rung such as ``flex:128x64/2``; joined by ``+`` when several did)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("tokens", "unavailable", "kernel")

    length: int
    pattern: str
    stride: int
    streamed: bool
    bpb: float | None
    ppl: float | None
    tokens: int | None = None
    bytes: int = 0
    unavailable: str | None = None
    kernel: str | None = None


@dataclasses.dataclass(frozen=True)
class PairedRow(Row):
    """Use of context on the same bytes with the start held fixed (:mod:`lexkit.paired`): bpb at
    ``length`` and at ``longer`` under one pattern over ``documents``, ``ratio`` = bpb longer / bpb
    length and its 95 % interval over the documents (``low``, ``high``; None below two documents);
    ``unavailable`` says why a side could not run."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("unavailable",)

    pattern: str
    length: int
    longer: int
    documents: int
    bpb: float | None  # at length
    bpb_longer: float | None
    ratio: float | None
    low: float | None
    high: float | None
    unavailable: str | None = None


@dataclasses.dataclass(frozen=True)
class PositionRow(Row):
    """bpb of the window indices ``from_ <= p < to`` at one (length, pattern)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("tokens",)
    KEYS: ClassVar[dict[str, str]] = {"from_": "from"}

    length: int
    pattern: str
    from_: int
    to: int
    beyond_train: bool | None
    bpb: float
    tokens: int | None = None
    bytes: int = 0


def eval_rows(report: dict) -> list[EvalRow]:
    """The ``results`` of an evaluation report (a JSON file's or a live one's) as rows."""
    return [EvalRow.from_json(r) for r in report["results"]]


def position_rows(report: dict) -> list[PositionRow]:
    """The ``by_position`` buckets of an evaluation report as rows."""
    return [PositionRow.from_json(r) for r in report["by_position"]]


@dataclasses.dataclass(frozen=True)
class Evaluation(Row):
    """What the study keeps of one evaluation report: its rows, and the documents and bytes each
    length scored (:func:`lexkit.evaluate.evaluate` returns more)."""

    NESTED: ClassVar[dict[str, type[Row]]] = {"results": EvalRow, "by_position": PositionRow}

    results: list[EvalRow]
    by_position: list[PositionRow]
    documents: int
    bytes_per_document: int


# -- resolution, principles ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ResolutionRow(Row):
    """One length of an analytic or empirical resolution document (``note``: why R is n/a)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("note",)

    scheme: str | None
    length: int
    pattern: str
    resolution: float | None
    per_head: list | None
    per_layer: list | None
    entropy: float | None
    note: str | None = None


@dataclasses.dataclass(frozen=True)
class EmpiricalRow(Row):
    """Empirical resolution and attention entropy of a trained model at one (length, pattern): the
    means over layers, per layer, and per head of every layer (:func:`lexkit.resolution.empirical`);
    a length it cannot run has ``resolution`` None and a ``note``."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("texts", "per_layer", "per_head", "entropy", "entropy_per_layer",
                                           "entropy_per_head", "note")

    length: int
    pattern: str
    texts: int | None = None
    resolution: float | None = None
    per_layer: list[float] | None = None
    per_head: list[list[float]] | None = None
    entropy: float | None = None
    entropy_per_layer: list[float] | None = None
    entropy_per_head: list[list[float]] | None = None
    note: str | None = None


@dataclasses.dataclass(frozen=True)
class AnalyticRow(Row):
    """The study's analytic R (mean over heads) of one row of its grid (a scheme, or a layout: the mean
    over its layers, each layer's in ``per_layer``) as initialised, at one pattern and length.
    ``label`` is ``"scheme"`` in the JSON."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("per_layer",)
    KEYS: ClassVar[dict[str, str]] = {"label": "scheme"}

    label: str
    pattern: str
    length: int
    resolution: float | None
    per_layer: list[float] | None = None


@dataclasses.dataclass(frozen=True)
class AnalyticCurves(Row):
    """The analytic s[n] - s[0] (mean over heads) of every scheme at ``length``: the curves the
    study report plots."""

    length: int
    pattern: str
    curves: dict[str, list[float]]


@dataclasses.dataclass(frozen=True)
class PrinciplesRow(Row):
    """The design principles measured on a trained model (:func:`lexkit.instruments.principles.measure_principles`):
    order variance and translation change (None when no document was long enough)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("offset", "tokens")

    order_variance: float | None
    translation: float | None
    offset: int | None = None
    tokens: int | None = None


# -- retrieval ----------------------------------------------------------------------------------
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
    measured paired (:mod:`lexkit.paired`: the same bytes at every multiple, each window opening on a
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
