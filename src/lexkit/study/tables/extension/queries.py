"""What table E's report, figure and TensorBoard ask of results.json: its configurations as lines
(means over seeds), and section F, the stated goal, measured over every configuration of the study
(the grid's, :mod:`lexkit.study.results`, and table E's)."""

from __future__ import annotations

import dataclasses

from ... import results as query
from ...results import Mean, aggregate
from ...schema import StudyResults
from .rows import Finetuned, section


@dataclasses.dataclass(frozen=True)
class ExtensionLine:
    """One context-extension configuration under one pattern: its settings and ``bpb``, length ->
    (mean, std) over seeds."""

    label: str
    pattern: str
    scheme: str
    logn: bool
    finetune: Finetuned | None
    bpb: dict[int, Mean]


def extension_lines(doc: StudyResults) -> list[ExtensionLine]:
    """Table E's configurations, one per (label, pattern); empty when the study ran none."""
    ext = section(doc)
    rows = ext.rows if ext is not None else []
    out = []
    for label, pattern in dict.fromkeys((r.label, r.pattern) for r in rows):
        mine = [r for r in rows if r.label == label and r.pattern == pattern]
        bpb = {n: aggregate([x.bpb for r in mine for x in r.results if x.length == n]) for n in doc.lengths}
        out.append(ExtensionLine(label, pattern, mine[0].scheme, mine[0].logn, mine[0].finetune, bpb))
    return out


def scalars(doc: StudyResults) -> dict[str, dict[tuple[str, str], dict[int, float]]]:
    """What TensorBoard shows of table E: each configuration's bpb by length per pattern."""
    out: dict[str, dict[tuple[str, str], dict[int, float]]] = {}
    for line in extension_lines(doc):
        points = {n: mean for n, (mean, _) in line.bpb.items() if mean is not None}
        if points:
            out.setdefault(line.label, {})["bpb", line.pattern] = points
    return out


# -- F: the stated goal ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class BpbCurve:
    """Anything the study measured bpb of: a (row, pattern) of the main grid or a line of table E,
    with ``bpb``: length -> mean over seeds."""

    name: str
    pattern: str
    finetuned: bool
    bpb: dict[int, float | None]


def curves(doc: StudyResults) -> list[BpbCurve]:
    """Every bpb curve the study measured: each (row, pattern) of the main grid, then each
    context-extension line."""
    out = [BpbCurve(label, pattern, False, {n: query.evaluation(doc, label, pattern, n)[0] for n in doc.lengths})
           for label in query.labels(doc) for pattern in doc.patterns]
    out += [BpbCurve(line.label, line.pattern, line.finetune is not None,
                     {n: mean for n, (mean, _) in line.bpb.items()}) for line in extension_lines(doc)]
    return out


@dataclasses.dataclass(frozen=True)
class Best:
    """A curve and its bpb at the length it was the best at."""

    curve: BpbCurve
    value: float


@dataclasses.dataclass(frozen=True)
class Goal:
    """The lowest bpb at ``length`` (16x) over every curve, against the best any row of the grid
    reaches at 1x: ``margin`` = (best at 1x - best far) / best at 1x."""

    length: int
    best: Best
    one_x: Best
    margin: float


def _best(curves: list[BpbCurve], length: int) -> Best | None:
    scored = [(c.bpb[length], i) for i, c in enumerate(curves) if c.bpb.get(length) is not None]
    return Best(curves[min(scored)[1]], min(scored)[0]) if scored else None


def goal(doc: StudyResults) -> Goal | None:
    """The lowest bpb at 16x the training length (the longest length if 16x was not run) over
    every curve, against the best bpb any row of the grid reaches at 1x under any pattern;
    positive ``margin`` when the longer context is *used*. None when either length is missing."""
    t, far = doc.train_len, query.far_length(doc)
    if t not in doc.lengths or far == t:
        return None
    every = curves(doc)
    one = _best([c for c in every if c.name in query.labels(doc)], t)
    best = _best(every, far)
    if one is None or best is None:
        return None
    return Goal(far, best, one, (one.value - best.value) / one.value)
