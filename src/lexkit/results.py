"""A study's ``results.json``, read as one typed document (:class:`lexkit.rows.StudyResults`, every
version a study has written), and the queries every reader of it goes through: the report's tables
and findings, its figures, its CSV and TensorBoard. A table and the figure beside it can never
disagree: both ask the same question here.

A cell with several seeds aggregates to the mean and the sample standard deviation; a cell nobody
could compute (``None``, NaN) is left out, and a cell with no value at all is ``(None, None)``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict
from pathlib import Path

from .rows import ContextRow, Finetuned, PositionRow, StudyResults, StudyRun

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
    if not vals:
        return None, None
    mean = sum(vals) / len(vals)
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else None
    return mean, std


def seed_mean(points) -> list[tuple[float, float]]:
    """(x, y) points of every seed as one line: the mean y at each x, in x order."""
    by_x = defaultdict(list)
    for x, y in points:
        by_x[x].append(y)
    return [(x, mean) for x in sorted(by_x) if (mean := aggregate(by_x[x])[0]) is not None]


# -- the main grid: schemes x patterns x lengths ---------------------------------------------------
def schemes(doc: StudyResults) -> list[str]:
    """The schemes of the study, in the order it ran them."""
    return list(dict.fromkeys(r.scheme for r in doc.runs))


def runs_of(doc: StudyResults, scheme: str) -> list[StudyRun]:
    """Every seed's run of ``scheme``."""
    return [r for r in doc.runs if r.scheme == scheme]


def evaluation(doc: StudyResults, scheme: str, pattern: str, length: int, key: str = "bpb") -> Mean:
    """(mean, std) over seeds of one evaluation cell (``key``: ``bpb`` or ``ppl``)."""
    return aggregate([getattr(row, key) for run in runs_of(doc, scheme) for row in run.eval.results
                      if row.pattern == pattern and row.length == length])


def curve(doc: StudyResults, scheme: str, pattern: str, key: str = "bpb") -> dict[int, float]:
    """The mean over seeds of one (scheme, pattern) at every length that has one."""
    return {n: v for n in doc.lengths if (v := evaluation(doc, scheme, pattern, n, key)[0]) is not None}


def empirical_resolution(doc: StudyResults, scheme: str, pattern: str, length: int) -> Mean:
    """(mean, std) over seeds of the empirical R (mean over heads, then layers)."""
    return aggregate([row.resolution for run in runs_of(doc, scheme) for row in run.resolution
                      if row.pattern == pattern and row.length == length])


def analytic_resolution(doc: StudyResults, scheme: str, pattern: str, length: int) -> Mean:
    """(R, None): the analytic R computed before training (one value, no seeds)."""
    for row in doc.analytic:
        if row.scheme == scheme and row.pattern == pattern and row.length == length:
            return row.resolution, None
    return None, None


def resolution_per_layer(doc: StudyResults, scheme: str, pattern: str = "causal") -> tuple[int, list[float]] | None:
    """The empirical R of each layer (mean over seeds) at the longest length measured under
    ``pattern``, with that length; None when no layer was measured."""
    by_len = defaultdict(list)
    for run in runs_of(doc, scheme):
        for r in run.resolution:
            if r.pattern == pattern and r.per_layer:
                by_len[r.length].append(r.per_layer)
    if not by_len:
        return None
    length, layers = max(by_len.items())
    return length, [sum(v) / len(v) for v in zip(*layers)]


def entropy(doc: StudyResults, scheme: str, pattern: str) -> list[tuple[float, float]]:
    """Attention entropy against length (mean over layers, then seeds)."""
    return seed_mean((r.length, r.entropy) for run in runs_of(doc, scheme) for r in run.resolution
                     if r.pattern == pattern and r.entropy is not None)


def best_pattern(doc: StudyResults, scheme: str, length: int) -> str | None:
    """The pattern with the lowest mean bpb at ``length`` (None if the length was not run)."""
    if length not in doc.lengths:
        return None
    scored = [(v, p) for p in doc.patterns if (v := evaluation(doc, scheme, p, length)[0]) is not None]
    return min(scored)[1] if scored else None


def by_position(doc: StudyResults, scheme: str, pattern: str, length: int) -> list[PositionRow]:
    """Every seed's loss-by-position rows of one (scheme, pattern, length)."""
    return [r for run in runs_of(doc, scheme) for r in run.eval.by_position
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
    """Every evaluation cell of every seed's run, one dict per (scheme, seed, pattern, length):
    the study's CSV."""
    return [{"scheme": run.scheme, "seed": run.seed, "pattern": row.pattern, "length": row.length, "bpb": row.bpb,
             "ppl": row.ppl, "bytes": row.bytes, "unavailable": row.unavailable or ""}
            for run in doc.runs for row in run.eval.results]


@dataclasses.dataclass(frozen=True)
class Principles:
    """Table D's row of a scheme: order variance and translation change (means over seeds), the
    extrapolation ratios (bpb at 4x and 16x over bpb at 1x, causal), the best pattern at 16x, and
    per pattern the bpb of positions past the training length minus that of the last bucket
    inside it, at the longest length."""

    scheme: str
    order_variance: float | None
    translation: float | None
    ratio_4x: float | None
    ratio_16x: float | None
    best_pattern_16x: str | None
    beyond_minus_inside: dict[str, float]


def principles(doc: StudyResults) -> list[Principles]:
    """:class:`Principles` of every scheme, in the study's order."""
    t, lengths = doc.train_len, doc.lengths
    out = []
    for scheme in schemes(doc):
        runs = runs_of(doc, scheme)
        one = evaluation(doc, scheme, "causal", t)[0] if t in lengths else None

        def ratio(n: int, scheme: str = scheme, one: float | None = one):
            value = evaluation(doc, scheme, "causal", n)[0] if n in lengths else None
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
        out.append(Principles(scheme, aggregate([r.principles.order_variance for r in runs])[0],
                              aggregate([r.principles.translation for r in runs])[0], ratio(4 * t), ratio(16 * t),
                              best_pattern(doc, scheme, 16 * t), falls))
    return out


# -- context extension (tables E and F) -------------------------------------------------------------
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
    rows = doc.extension.rows if doc.extension is not None else []
    out = []
    for label, pattern in dict.fromkeys((r.label, r.pattern) for r in rows):
        mine = [r for r in rows if r.label == label and r.pattern == pattern]
        bpb = {n: aggregate([x.bpb for r in mine for x in r.results if x.length == n]) for n in doc.lengths}
        out.append(ExtensionLine(label, pattern, mine[0].scheme, mine[0].logn, mine[0].finetune, bpb))
    return out


@dataclasses.dataclass(frozen=True)
class Configuration:
    """Anything the study measured bpb of: a (scheme, pattern) of the main grid or a line of table
    E, with ``bpb``: length -> mean over seeds."""

    name: str
    pattern: str
    finetuned: bool
    bpb: dict[int, float | None]


def configurations(doc: StudyResults) -> list[Configuration]:
    """Every configuration the study measured: each (scheme, pattern) of the main grid, then each
    context-extension line."""
    out = [Configuration(scheme, pattern, False, {n: evaluation(doc, scheme, pattern, n)[0] for n in doc.lengths})
           for scheme in schemes(doc) for pattern in doc.patterns]
    out += [Configuration(line.label, line.pattern, line.finetune is not None,
                          {n: mean for n, (mean, _) in line.bpb.items()}) for line in extension_lines(doc)]
    return out


@dataclasses.dataclass(frozen=True)
class Best:
    """A configuration and its bpb at the length it was the best at."""

    config: Configuration
    value: float


@dataclasses.dataclass(frozen=True)
class Goal:
    """The lowest bpb at ``length`` (16x) over every configuration, against the best any trained
    scheme reaches at 1x: ``margin`` = (best at 1x - best far) / best at 1x."""

    length: int
    best: Best
    one_x: Best
    margin: float


def _best(configs: list[Configuration], length: int) -> Best | None:
    scored = [(c.bpb[length], i) for i, c in enumerate(configs) if c.bpb.get(length) is not None]
    return Best(configs[min(scored)[1]], min(scored)[0]) if scored else None


def goal(doc: StudyResults) -> Goal | None:
    """The lowest bpb at 16x the training length (the longest length if 16x was not run) over
    every configuration, against the best bpb any trained scheme reaches at 1x under any pattern
    (the main grid); positive ``margin`` when the longer context is *used*. None when either
    length is missing."""
    t = doc.train_len
    far = 16 * t if 16 * t in doc.lengths else max(doc.lengths)
    if t not in doc.lengths or far == t:
        return None
    every = configurations(doc)
    one = _best([c for c in every if c.name in schemes(doc)], t)
    best = _best(every, far)
    if one is None or best is None:
        return None
    return Goal(far, best, one, (one.value - best.value) / one.value)


# -- use of context (table G) -----------------------------------------------------------------
#: the goal: bpb at 16x within this fraction of the configuration's own bpb at 1x ...
FLAT = 0.03
#: ... and at least this exact match at 16x at every needle depth
RETRIEVES = 0.9


@dataclasses.dataclass(frozen=True)
class RetrievalLine:
    """One configuration of table G under one pattern, by multiple of the training length:
    ``accuracy`` (exact match over every depth), ``low``/``high`` (its 95 % interval),
    ``answer_bits``, ``bpb`` (None where not measured) and ``worst_depth`` (the lowest exact match
    of any one depth)."""

    label: str
    pattern: str
    kind: str
    scheme: str
    run: str
    accuracy: dict[int, float]
    low: dict[int, float]
    high: dict[int, float]
    answer_bits: dict[int, float]
    bpb: dict[int, float | None]
    worst_depth: dict[int, float]


def retrieval_lines(doc: StudyResults) -> list[RetrievalLine]:
    """Table G's configurations, one per (label, pattern); empty when the study ran none."""
    g = doc.retrieval
    out = []
    for entry in g.configs if g is not None else []:
        by: dict[int, ContextRow] = {r.multiple: r for r in entry.rows}
        depth: dict[int, list[float]] = {}
        for c in entry.cells:
            depth.setdefault(c.length // g.train_len, []).append(c.accuracy)
        out.append(RetrievalLine(entry.label, entry.pattern, entry.kind, entry.scheme, entry.run,
                                 *({m: getattr(r, key) for m, r in by.items()}
                                   for key in ("accuracy", "low", "high", "answer_bits", "bpb")),
                                 {m: min(v) for m, v in depth.items()}))
    return out


def stops_at(line: RetrievalLine, level: float = RETRIEVES) -> int | None:
    """The first multiple of the training length at which ``line`` retrieves below ``level`` over
    all depths (1 when it never retrieves); None when it keeps ``level`` at every multiple measured."""
    return next((m for m in sorted(line.accuracy) if line.accuracy[m] < level), None)


@dataclasses.dataclass(frozen=True)
class Scored:
    """A :class:`RetrievalLine` against the goal at the longest multiple: ``ratio`` = bpb far / bpb
    1x, ``flat`` (within :data:`FLAT`), ``worst`` (its lowest per-depth exact match far), ``met``,
    and ``reach``, the longest multiple up to which every depth keeps :data:`RETRIEVES` (None when it
    does not at 1x)."""

    line: RetrievalLine
    ratio: float | None
    flat: bool
    worst: float
    met: bool
    reach: int | None


@dataclasses.dataclass(frozen=True)
class ContextGoal:
    """The goal of table G measured: ``met`` (the configurations that meet it), ``nearest`` (one that
    meets it, else the flat one that retrieves best at every depth, else the flattest),
    ``best_retrieval`` (whatever its bpb) and ``longest_reach``."""

    multiple: int
    scored: list[Scored]
    met: list[str]
    nearest: Scored
    best_retrieval: Scored
    longest_reach: Scored | None


def _reach(worst_depth: dict[int, float]) -> int | None:
    """The longest multiple up to which every depth keeps :data:`RETRIEVES` (None below it at the first)."""
    held = sorted(worst_depth)
    if not held or worst_depth[held[0]] < RETRIEVES:
        return None
    return next((held[i - 1] for i, m in enumerate(held) if worst_depth[m] < RETRIEVES), held[-1])


def context_goal(doc: StudyResults) -> ContextGoal | None:
    """The stated goal of table G: a configuration whose bpb at the longest multiple (16x) is
    within :data:`FLAT` of its own bpb at 1x *and* whose exact match there is at least
    :data:`RETRIEVES` at every depth; None when the study ran no table G."""
    lines = retrieval_lines(doc)
    if not lines:
        return None
    far = max(doc.retrieval.multiples)
    scored = []
    for line in lines:
        one, long = line.bpb.get(1), line.bpb.get(far)
        ratio = long / one if one and long is not None else None
        flat = ratio is not None and ratio <= 1 + FLAT
        worst = line.worst_depth.get(far, 0.0)
        scored.append(Scored(line, ratio, flat, worst, flat and worst >= RETRIEVES, _reach(line.worst_depth)))

    def rank(s: Scored):  # better retrieval first, then flatter
        return s.worst, s.line.accuracy.get(far, 0.0), -(s.ratio if s.ratio is not None else float("inf"))

    met = [s for s in scored if s.met]
    flat = [s for s in scored if s.flat]
    if met or flat:
        nearest = max(met or flat, key=rank)
    else:
        nearest = min((s for s in scored if s.ratio is not None), key=lambda s: s.ratio, default=scored[0])
    reaching = [s for s in scored if s.reach is not None]
    return ContextGoal(far, scored, [f"{s.line.label} ({s.line.pattern})" for s in met], nearest,
                       max(scored, key=rank),
                       max(reaching, key=lambda s: (s.reach, s.line.accuracy.get(s.reach, 0)), default=None))
