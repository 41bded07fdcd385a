"""A study's ``results.json``, read as one typed document (:class:`lexkit.study.schema.StudyResults`, every
version a study has written), and the queries of its grid (rows by label, patterns, lengths) every
reader goes through: the report's tables, its figures, its CSV and TensorBoard. A table and the
figure beside it can never disagree: both ask the same question here. (Each table beside the grid
asks its own section through its own queries, in :mod:`lexkit.study.tables`.)

A row of the grid is named by its *label*: a position scheme's spec, or a layout as given. A cell
with several seeds aggregates to the mean and the sample standard deviation; a cell nobody could
compute (``None``, NaN) is left out, and a cell with no value at all is ``(None, None)``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict
from pathlib import Path

from ..core.stats import mean_std
from ..instruments.evaluate.rows import PositionRow
from .schema import StudyResults, StudyRun

Mean = tuple[float | None, float | None]  # (mean, sample std) over seeds


def read(source: StudyResults | dict | str | Path) -> StudyResults:
    """The typed document of a results.json (its path, or its parsed JSON), or ``source`` itself."""
    if isinstance(source, StudyResults):
        return source
    if isinstance(source, (str, Path)):
        source = json.loads(Path(source).read_text())
    return StudyResults.from_json(source)


def aggregate(values: list) -> Mean:
    """(mean, sample std) of the finite numbers in ``values``; std is None below two values."""
    vals = [v for v in values if v is not None and isinstance(v, (int, float)) and math.isfinite(v)]
    return mean_std(vals) if vals else (None, None)


def seed_mean(points) -> list[tuple[float, float]]:
    """(x, y) points of every seed as one line: the mean y at each x, in x order."""
    by_x = defaultdict(list)
    for x, y in points:
        by_x[x].append(y)
    return [(x, mean) for x in sorted(by_x) if (mean := aggregate(by_x[x])[0]) is not None]


# -- the main grid: rows (schemes and layouts) x patterns x lengths ----------------------------------
def far_length(doc: StudyResults) -> int:
    """The length extrapolation is read at: 16x the training length, else the longest length run."""
    return 16 * doc.train_len if 16 * doc.train_len in doc.lengths else max(doc.lengths)


def labels(doc: StudyResults) -> list[str]:
    """The labels of the rows of the study's grid (its schemes, then its layouts), in the order it ran them."""
    return list(dict.fromkeys(r.label for r in doc.runs))


def runs_of(doc: StudyResults, label: str) -> list[StudyRun]:
    """Every seed's run of the row ``label``."""
    return [r for r in doc.runs if r.label == label]


def evaluation(doc: StudyResults, label: str, pattern: str, length: int, key: str = "bpb") -> Mean:
    """(mean, std) over seeds of one evaluation cell (``key``: ``bpb`` or ``ppl``); (None, None) for a
    cell the study has but could not run (every seed unavailable). KeyError naming the valid ones for a
    row label, pattern or length the study does not have (it read as an unavailable cell)."""
    for what, value, valid in (("row", label, list(dict.fromkeys(run.label for run in doc.runs))),
                               ("pattern", pattern, list(doc.patterns)), ("length", length, list(doc.lengths))):
        if value not in valid:
            raise KeyError(f"the study has no {what} {value!r}; its {what}s: {', '.join(map(str, valid))}")
    return aggregate([getattr(row, key) for run in runs_of(doc, label) for row in run.eval.results
                      if row.pattern == pattern and row.length == length])


def curve(doc: StudyResults, label: str, pattern: str, key: str = "bpb") -> dict[int, float]:
    """The mean over seeds of one (row, pattern) at every length that has one."""
    return {n: v for n in doc.lengths if (v := evaluation(doc, label, pattern, n, key)[0]) is not None}


def empirical_resolution(doc: StudyResults, label: str, pattern: str, length: int) -> Mean:
    """(mean, std) over seeds of the empirical R (mean over heads, then layers)."""
    return aggregate([row.resolution for run in runs_of(doc, label) for row in run.resolution
                      if row.pattern == pattern and row.length == length])


def analytic_resolution(doc: StudyResults, label: str, pattern: str, length: int) -> Mean:
    """(R, None): the analytic R computed before training (one value, no seeds)."""
    for row in doc.analytic:
        if row.label == label and row.pattern == pattern and row.length == length:
            return row.resolution, None
    return None, None


def resolution_per_layer(doc: StudyResults, label: str, pattern: str = "causal") -> tuple[int, list[float]] | None:
    """The empirical R of each layer (mean over seeds) at the longest length measured under
    ``pattern``, with that length; None when no layer was measured."""
    by_len = defaultdict(list)
    for run in runs_of(doc, label):
        for r in run.resolution:
            if r.pattern == pattern and r.per_layer:
                by_len[r.length].append(r.per_layer)
    if not by_len:
        return None
    length, layers = max(by_len.items())
    return length, [sum(v) / len(v) for v in zip(*layers)]


def layouts(doc: StudyResults) -> list[str]:
    """The labels of the grid's rows that are layouts (a scheme, a pattern, a temperature per layer),
    whose resolution in table C is a mean over layers."""
    return [label for label in labels(doc) if runs_of(doc, label)[0].layered]


def layer_resolution(doc: StudyResults, label: str, pattern: str, length: int
                     ) -> tuple[list[float] | None, list[float] | None]:
    """Each layer's R of a layout at one (pattern, length): analytic (as initialised; None in a study
    that kept only the mean) and empirical (mean over seeds; None where not measured)."""
    analytic = next((row.per_layer for row in doc.analytic
                     if row.label == label and row.pattern == pattern and row.length == length), None)
    measured = [r.per_layer for run in runs_of(doc, label) for r in run.resolution
                if r.pattern == pattern and r.length == length and r.per_layer]
    return analytic, [sum(v) / len(v) for v in zip(*measured)] if measured else None


def entropy(doc: StudyResults, label: str, pattern: str) -> list[tuple[float, float]]:
    """Attention entropy against length (mean over layers, then seeds)."""
    return seed_mean((r.length, r.entropy) for run in runs_of(doc, label) for r in run.resolution
                     if r.pattern == pattern and r.entropy is not None)


def best_pattern(doc: StudyResults, label: str, length: int) -> str | None:
    """The pattern with the lowest mean bpb at ``length`` (None if the length was not run)."""
    if length not in doc.lengths:
        return None
    scored = [(v, p) for p in doc.patterns if (v := evaluation(doc, label, p, length)[0]) is not None]
    return min(scored)[1] if scored else None


def by_position(doc: StudyResults, label: str, pattern: str, length: int) -> list[PositionRow]:
    """Every seed's loss-by-position rows of one (row, pattern, length)."""
    return [r for run in runs_of(doc, label) for r in run.eval.by_position
            if r.length == length and r.pattern == pattern]


def kernels_ran(doc: StudyResults) -> dict[str, list[int]]:
    """The attention kernels the study's evaluations actually ran (each row's ``kernel``: ``auto``
    resolved, or the flex ladder's rung or fallback), each with the lengths it ran at; empty for
    results recorded before rows carried the kernel."""
    at: dict[str, set[int]] = {}
    for run in doc.runs:
        for row in run.eval.results:
            if row.kernel:
                at.setdefault(row.kernel, set()).add(row.length)
    return {kernel: sorted(lengths) for kernel, lengths in at.items()}


def evaluation_table(doc: StudyResults) -> list[dict]:
    """Every evaluation cell of every seed's run, one dict per (row, seed, pattern, length): the
    study's CSV (the row's label in its ``scheme`` column)."""
    return [{"scheme": run.label, "seed": run.seed, "pattern": row.pattern, "length": row.length, "bpb": row.bpb,
             "ppl": row.ppl, "bytes": row.bytes, "unavailable": row.unavailable or ""}
            for run in doc.runs for row in run.eval.results]


@dataclasses.dataclass(frozen=True)
class Principles:
    """Table D's row of a row of the grid: order variance and translation change (means over seeds),
    the extrapolation ratios (bpb at 4x and 16x over bpb at 1x, causal), the best pattern at 16x, and
    per pattern the bpb of positions past the training length minus that of the last bucket
    inside it, at the longest length."""

    label: str
    order_variance: float | None
    translation: float | None
    ratio_4x: float | None
    ratio_16x: float | None
    best_pattern_16x: str | None
    beyond_minus_inside: dict[str, float]


def principles(doc: StudyResults) -> list[Principles]:
    """:class:`Principles` of every row of the grid, in the study's order."""
    t, lengths = doc.train_len, doc.lengths
    out = []
    for label in labels(doc):
        runs = runs_of(doc, label)
        one = evaluation(doc, label, "causal", t)[0] if t in lengths else None

        def ratio(n: int, label: str = label, one: float | None = one):
            value = evaluation(doc, label, "causal", n)[0] if n in lengths else None
            return value / one if value is not None and one else None

        falls = {}
        for pattern in doc.patterns:
            inside, beyond = [], []
            for run in runs:
                rows = [r for r in run.eval.by_position if r.length == max(lengths) and r.pattern == pattern]
                inside += [r.bpb for r in rows if not r.beyond_train][-1:]
                beyond += [r.bpb for r in rows if r.beyond_train]
            if inside and beyond:
                falls[pattern] = (aggregate(beyond)[0] or 0) - (aggregate(inside)[0] or 0)
        out.append(Principles(label, aggregate([r.principles.order_variance for r in runs])[0],
                              aggregate([r.principles.translation for r in runs])[0], ratio(4 * t), ratio(16 * t),
                              best_pattern(doc, label, 16 * t), falls))
    return out
