"""What table G's report and figures ask of results.json: its configurations as lines pooled over
seeds and needle formats (:class:`RetrievalLine`), which differ beyond doubt, where each stops
retrieving, and the goal of the table (:func:`context_goal`)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from ....results import aggregate
from ....rows import StudyResults
from ....stats import wilson
from .rows import section

#: the goal: bpb at 16x within this fraction of the configuration's own bpb at 1x ...
FLAT = 0.03
#: ... and at least this exact match at 16x at every needle depth
RETRIEVES = 0.9


#: the formats of table G: those the runs trained on, those held out from training
GROUPS = ("trained", "held-out")


@dataclasses.dataclass(frozen=True)
class RetrievalLine:
    """One configuration of table G under one pattern, in one ``group`` of needle formats
    (:data:`GROUPS`), pooled over its ``seeds`` and the group's ``formats``, by multiple of the
    training length: ``accuracy`` (exact match over every depth, format and seed), ``low``/``high``
    (its 95 % Wilson interval over the ``needles`` pooled), ``spread`` (the lowest and highest
    seed's exact match), ``answer_bits``, ``bpb`` (mean over seeds; None where not measured),
    ``worst_depth`` (the lowest exact match of any one depth) and ``learned``: whether the
    configuration retrieves at 1x (at least :data:`RETRIEVES` on the held-out formats, or on the
    trained ones when none was scored). A configuration that did not learn is not ranked past 1x."""

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
    group: str = "trained"
    seeds: int = 1
    spread: dict[int, tuple[float, float]] = dataclasses.field(default_factory=dict)
    needles: dict[int, int] = dataclasses.field(default_factory=dict)
    formats: tuple[str, ...] = ()
    learned: bool = True
    training: str | None = None


def _group(entry) -> str:
    return "held-out" if entry.held_out else "trained"


def _pooled(entries: list, train_len: int) -> dict:
    """The pooled measures of entries of one (label, pattern, group), by multiple (see
    :class:`RetrievalLine`)."""
    counts: dict[int, list] = defaultdict(lambda: [0, 0, 0.0])  # by multiple: needles, correct, bits x needles
    depth: dict[tuple[int, float], list] = defaultdict(lambda: [0, 0])  # by (multiple, depth)
    seed: dict[tuple[int, int], list] = defaultdict(lambda: [0, 0])  # by (multiple, seed)
    for entry in entries:
        for c in entry.cells:
            m = c.length // train_len
            for cell in (counts[m], depth[m, c.depth], seed[m, entry.seed]):
                cell[0] += c.samples
                cell[1] += c.correct
            counts[m][2] += c.answer_bits * c.samples
    out = {"accuracy": {}, "low": {}, "high": {}, "answer_bits": {}, "worst_depth": {}, "spread": {}, "needles": {}}
    for m, (n, k, bits) in sorted(counts.items()):
        out["accuracy"][m], out["needles"][m], out["answer_bits"][m] = k / n, n, bits / n
        out["low"][m], out["high"][m] = wilson(k, n)
        out["worst_depth"][m] = min(kk / nn for (mm, _), (nn, kk) in depth.items() if mm == m)
        per_seed = [kk / nn for (mm, _), (nn, kk) in seed.items() if mm == m]
        out["spread"][m] = (min(per_seed), max(per_seed))
    bpb: dict[int, list] = defaultdict(list)
    for entry in entries:
        for r in entry.rows:
            bpb[r.multiple].append(r.bpb)
    out["bpb"] = {m: aggregate(v)[0] for m, v in bpb.items()}
    return out


def retrieval_lines(doc: StudyResults, group: str | None = "trained") -> list[RetrievalLine]:
    """Table G's configurations, one per (label, pattern) in ``group`` (:data:`GROUPS`; None: one
    per (label, pattern, group), trained first), pooled over seeds and formats; empty when the
    study ran none."""
    g = section(doc)
    if g is None:
        return []
    by: dict[tuple[str, str, str], list] = {}
    for entry in g.configs:
        by.setdefault((entry.label, entry.pattern, _group(entry)), []).append(entry)
    pooled = {key: _pooled(entries, g.train_len) for key, entries in by.items()}
    out = []
    for (label, pattern, kind), entries in by.items():
        if group is not None and kind != group:
            continue
        first, p = entries[0], pooled[(label, pattern, kind)]
        judge = pooled.get((label, pattern, "held-out"), p)
        out.append(RetrievalLine(label, pattern, first.kind, first.scheme, first.run, p["accuracy"], p["low"],
                                 p["high"], p["answer_bits"], p["bpb"], p["worst_depth"], kind,
                                 len({e.seed for e in entries}), p["spread"], p["needles"],
                                 tuple(dict.fromkeys(e.format for e in entries)),
                                 judge["accuracy"].get(min(judge["accuracy"], default=1), 0.0) >= RETRIEVES,
                                 first.training))
    order = {key[:2]: i for i, key in reversed(list(enumerate(by)))}  # where each (label, pattern) came first
    return sorted(out, key=lambda r: (order[r.label, r.pattern], GROUPS.index(r.group)))


def held_out_scored(doc: StudyResults) -> bool:
    """Whether table G scored held-out formats (a study before them scored the trained one alone)."""
    g = section(doc)
    return g is not None and any(e.held_out for e in g.configs)


def separated(a: RetrievalLine, b: RetrievalLine, m: int) -> bool:
    """Whether two lines differ at multiple ``m`` beyond doubt: their 95 % intervals (over the
    pooled needles) do not overlap, and neither do their seeds (every seed of one above every
    seed of the other)."""
    if m not in a.accuracy or m not in b.accuracy:
        return False
    lo, hi = (a, b) if a.accuracy[m] < b.accuracy[m] else (b, a)
    return lo.high[m] < hi.low[m] and lo.spread[m][1] < hi.spread[m][0]


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
    :data:`RETRIEVES` at every depth, on the held-out formats (the skill; on the trained format in a
    study that scored no held-out one); None when the study ran no table G. A configuration that
    did not learn at 1x is scored but never ranked (neither nearest nor best)."""
    lines = retrieval_lines(doc, "held-out" if held_out_scored(doc) else "trained")
    if not lines:
        return None
    far = max(section(doc).multiples)
    scored = []
    for line in lines:
        one, long = line.bpb.get(1), line.bpb.get(far)
        ratio = long / one if one and long is not None else None
        flat = ratio is not None and ratio <= 1 + FLAT
        worst = line.worst_depth.get(far, 0.0)
        met = flat and worst >= RETRIEVES and line.learned
        scored.append(Scored(line, ratio, flat, worst, met, _reach(line.worst_depth)))

    def rank(s: Scored):  # better retrieval first, then flatter
        return s.worst, s.line.accuracy.get(far, 0.0), -(s.ratio if s.ratio is not None else float("inf"))

    ranked = [s for s in scored if s.line.learned] or scored
    met = [s for s in ranked if s.met]
    flat = [s for s in ranked if s.flat]
    if met or flat:
        nearest = max(met or flat, key=rank)
    else:
        nearest = min((s for s in ranked if s.ratio is not None), key=lambda s: s.ratio, default=ranked[0])
    reaching = [s for s in ranked if s.reach is not None]
    return ContextGoal(far, scored, [f"{s.line.label} ({s.line.pattern})" for s in met], nearest,
                       max(ranked, key=rank),
                       max(reaching, key=lambda s: (s.reach, s.line.accuracy.get(s.reach, 0)), default=None))


def scalars(doc: StudyResults) -> dict:
    """What TensorBoard shows of table G: nothing yet (its numbers are exact match by length and depth)."""
    return {}
