"""The evaluation's typed rows (its JSON document's schema on :class:`lexkit.documents.rows.Row`):
:class:`EvalRow` (one length and pattern), :class:`PairedRow` (paired bpb against the shortest length),
:class:`PositionRow` (loss by position) and :class:`Evaluation` (the study's evaluation cell); and its
report, :class:`EvalReport` (the document's top level, :mod:`lexkit.documents.report`)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ...documents.report import key
from ...documents.rows import Row
from .. import IdentityReport


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
    """Use of context on the same bytes with the start held fixed (:mod:`lexkit.instruments.evaluate.paired`): bpb at
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


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class EvalReport(IdentityReport):
    """``lexkit eval``'s report (:func:`lexkit.evaluate.evaluate_run`): the header, the subject's (what ran,
    :class:`lexkit.instruments.IdentityReport`), the documents, and every (length, pattern) scored."""

    run: str = key("the run directory or hf:PATH evaluated")
    model: dict | None = key("an hf: model's configuration (lexkit.model.hf.HFConfig)", optional=True)
    logn: bool | None = key("whether log-n attention scaling ran (a lexkit run)", optional=True)
    train_len: int | None = key("the training length")
    random_positions: int | None = key("a run trained at random positions: their range, L_max", optional=True)
    data: dict = key("the documents: spec, split, fingerprint, how many and how long")
    kernel: str = key("the attention kernel asked for (each row says which ran)")
    stream: bool | str = key("whether windows stream through the KV cache: auto, true or false, as asked")
    lengths: list[int] = key("the lengths scored, in the model's unit (bytes; tokens for hf:)")
    patterns: list[str] = key("the attention patterns scored, canonical specs")
    stride: int | None = key("sliding windows' stride; null: non-overlapping windows (the paper's protocol)")
    start: str = key("what a window's first token is: bos or text")
    results: list[dict] = key("one row per length x pattern (EvalRow)")
    by_position: list[dict] = key("bpb by position within the window (PositionRow)")
    paired: list[dict] | None = key("--paired: each longer length against the shortest on the same bytes (PairedRow)",
                                    optional=True)
