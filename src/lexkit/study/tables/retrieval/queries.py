"""What table G's report and figures ask of results.json: its configurations as lines pooled over
seeds and needle formats (:class:`RetrievalLine`), which differ beyond doubt, where each stops
retrieving, and the goal of the table (:func:`context_goal`)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence

from ....core.stats import mean_interval, wilson
from ...results import aggregate
from ...schema import StudyResults
from .rows import RetrievalSection, section

#: the goal: bpb at 16x within this fraction of the configuration's own bpb at 1x ...
FLAT = 0.03
#: ... and at least this exact match at 16x at every needle depth; a configuration *learned the
#: skill* when its mean over seeds on the trained formats reaches this at 1x
RETRIEVES = 0.9


#: the formats of table G: those the runs trained on, those held out from training
GROUPS = ("trained", "held-out")


@dataclasses.dataclass(frozen=True)
class RetrievalLine:
    """One configuration of table G (its ``origin``: :data:`.rows.ORIGINS`) under one pattern, in one
    ``group`` of needle formats (:data:`GROUPS`), over its ``seeds`` and the group's ``formats``, by
    multiple of the training length:

    * ``accuracy``: exact match over every depth, format and seed (every seed scores as many needles,
      so this is the mean of ``per_seed``, each seed's exact match);
    * ``over_seeds``: the 95 % Student t interval of that mean over the seeds
      (:func:`lexkit.core.stats.mean_interval`: how far another training seed could land), widened to
      ``over_needles`` where that is wider (seeds that agree exactly still scored few needles),
      within [0, 1]; None with one seed. What every finding rests on (:func:`interval`);
    * ``over_needles``: the 95 % Wilson interval over the ``needles`` pooled, which counts the
      needle sampling alone (as if every seed were one run);
    * ``answer_bits``, ``bpb`` (mean over seeds; None where not measured), ``worst_depth`` (the
      goal's rule, :func:`worst_depth`: the lowest exact match of any one depth of any one format, each
      format's own worst depth over seeds, never the formats averaged at a depth), ``by_format``
      (exact match by format, over seeds);
    * ``guess``, ``candidate``: by multiple, for a task whose documents hold other candidates
      (kvthread, ordinal): the exact match of guessing uniformly among them and the share of answers
      that are some candidate (:class:`lexkit.instruments.retrieval.rows.RetrievalCell`), over every depth,
      format and seed;
      empty for other tasks;
    * ``bpb_ratio``: by multiple past 1x, ``(ratio, low, high)`` of the paired bpb there over 1x
      (:mod:`lexkit.instruments.evaluate.paired`: the same bytes, the start held fixed), the mean over seeds with its
      interval: over the documents with one seed, the Student t interval over seeds widened to the
      seeds' mean interval over documents with several (over seeds alone where a seed read one
      document; None where not measured paired, or one seed on one document);
    * ``learned``: whether the configuration learned the skill, at least :data:`RETRIEVES` on the
      trained formats at 1x (mean over seeds; the same for its trained and held-out lines). How it
      *generalizes* is each held-out format's number at 1x (``by_format``), not a gate. A
      configuration that did not learn is not ranked past 1x."""

    label: str
    pattern: str
    origin: str
    scheme: str
    run: str
    accuracy: dict[int, float]
    per_seed: dict[int, tuple[float, ...]]
    over_seeds: dict[int, tuple[float, float] | None]
    over_needles: dict[int, tuple[float, float]]
    answer_bits: dict[int, float]
    bpb: dict[int, float | None]
    worst_depth: dict[int, float]
    group: str = "trained"
    seeds: int = 1
    needles: dict[int, int] = dataclasses.field(default_factory=dict)
    formats: tuple[str, ...] = ()
    by_format: dict[str, dict[int, float]] = dataclasses.field(default_factory=dict)
    learned: bool = True
    training: str | None = None
    bpb_ratio: dict[int, tuple[float, float | None, float | None]] = dataclasses.field(default_factory=dict)
    guess: dict[int, float] = dataclasses.field(default_factory=dict)
    candidate: dict[int, float] = dataclasses.field(default_factory=dict)

    @property
    def spread(self) -> dict[int, tuple[float, float]]:
        """The lowest and highest seed's exact match, by multiple."""
        return {m: (min(v), max(v)) for m, v in self.per_seed.items()}


def interval(line: RetrievalLine, m: int) -> tuple[float, float]:
    """The interval every finding of table G rests on, at multiple ``m``: over seeds (a line with
    several), else over needles (one seed: its sampling is all there is to measure)."""
    return line.over_seeds.get(m) or line.over_needles[m]


def interval_kind(line: RetrievalLine) -> str:
    """What :func:`interval` is for ``line``, in words."""
    return f"95 % over {line.seeds} seeds" if line.seeds > 1 else "95 % over needles, one seed"


def _group(entry) -> str:
    return "held-out" if entry.held_out else "trained"


def _pooled(entries: list, train_len: int) -> dict:
    """The measures of entries of one (label, pattern, group), by multiple (see :class:`RetrievalLine`)."""
    counts: dict[int, list] = defaultdict(lambda: [0, 0, 0.0])  # by multiple: needles, correct, bits x needles
    baseline: dict[int, list] = defaultdict(lambda: [0, 0.0, 0.0])  # by multiple: needles, guess, some candidate
    depth: dict[tuple[int, str, float], list] = defaultdict(lambda: [0, 0])  # by (multiple, format, depth)
    seed: dict[tuple[int, int], list] = defaultdict(lambda: [0, 0])  # by (multiple, seed)
    fmt: dict[tuple[str, int], list] = defaultdict(lambda: [0, 0])  # by (format, multiple)
    for entry in entries:
        for c in entry.cells:
            m = c.length // train_len
            for cell in (counts[m], depth[m, entry.format, c.depth], seed[m, entry.seed], fmt[entry.format, m]):
                cell[0] += c.samples
                cell[1] += c.correct
            counts[m][2] += c.answer_bits * c.samples
            if c.guess is not None and c.candidate is not None:
                baseline[m][0] += c.samples
                baseline[m][1] += c.guess * c.samples
                baseline[m][2] += c.candidate * c.samples
    out = {"accuracy": {}, "per_seed": {}, "over_seeds": {}, "over_needles": {}, "answer_bits": {},
           "worst_depth": {}, "needles": {}, "by_format": {}}
    for m, (n, k, bits) in sorted(counts.items()):
        out["accuracy"][m], out["needles"][m], out["answer_bits"][m] = k / n, n, bits / n
        out["over_needles"][m] = low, high = wilson(k, n)
        out["worst_depth"][m] = worst_depth({key[1:]: v for key, v in depth.items() if key[0] == m})
        per_seed = tuple(kk / nn for (mm, _), (nn, kk) in sorted(seed.items()) if mm == m)
        out["per_seed"][m] = per_seed
        t = mean_interval(list(per_seed))
        out["over_seeds"][m] = None if t is None else (max(0.0, min(t[0], low)), min(1.0, max(t[1], high)))
    for (name, m), (n, k) in fmt.items():
        out["by_format"].setdefault(name, {})[m] = k / n
    bpb: dict[int, list] = defaultdict(list)
    ratios: dict[int, dict[int, tuple]] = defaultdict(dict)  # by multiple, by seed: every format has its seed's
    for entry in entries:
        for r in entry.rows:
            bpb[r.multiple].append(r.bpb)
            if r.ratio is not None:
                ratios[r.multiple][entry.seed] = (r.ratio, r.ratio_low, r.ratio_high)
    out["bpb"] = {m: aggregate(v)[0] for m, v in bpb.items()}
    out["bpb_ratio"] = {m: _pooled_ratio(list(by_seed.values())) for m, by_seed in sorted(ratios.items())}
    out["guess"] = {m: g / n for m, (n, g, _) in sorted(baseline.items())}
    out["candidate"] = {m: c / n for m, (n, _, c) in sorted(baseline.items())}
    return out


def worst_depth(cells: dict[tuple[str, float], tuple[int, int] | list[int]]) -> float:
    """The goal's retrieval at one multiple (docs/hunt.md, table G, the sweep: one rule): the lowest
    exact match of any one depth of any one format or task, ``cells`` holding ``(needles, correct)``
    by ``(format, depth)`` (pooled over seeds). Each format's own worst depth, the worst of those:
    never the formats averaged at a depth, which would let a format at 100 % hide another at 40 %."""
    return min(k / n for n, k in cells.values())


def goal_worst(lines: Sequence[RetrievalLine | None], m: int) -> float | None:
    """The goal's retrieval at multiple ``m`` over ``lines`` (held-out formats and tasks, each a line,
    or one line pooling several formats): the least of their :attr:`RetrievalLine.worst_depth`, each
    already every format's own worst depth (:func:`worst_depth`); None when there is no line or one
    of them is None or did not score ``m`` (the goal needs every one). What table G
    (:func:`context_goal`) and the sweep (:meth:`lexkit.study.sweep.report.ArmLine.goal`) both read."""
    if not lines or any(line is None or m not in line.worst_depth for line in lines):
        return None
    return min(line.worst_depth[m] for line in lines)


def _pooled_ratio(seeds: list[tuple]) -> tuple[float, float | None, float | None]:
    """``(ratio, low, high)`` over seeds of their paired ratios (:attr:`RetrievalLine.bpb_ratio`): the
    mean, with the Student t interval over seeds widened to the seeds' mean interval over documents;
    where a seed has no interval over documents (one document), the interval over seeds alone (with
    several seeds), never none for want of one seed's; None, None with one seed and no interval."""
    mean = sum(r for r, _, _ in seeds) / len(seeds)
    t = mean_interval([r for r, _, _ in seeds])
    if any(low is None or high is None for _, low, high in seeds):
        return (mean, None, None) if t is None else (mean, t[0], t[1])
    low, high = (sum(v[i] for v in seeds) / len(seeds) for i in (1, 2))
    return (mean, low, high) if t is None else (mean, min(low, t[0]), max(high, t[1]))


def paired_documents(g: RetrievalSection) -> list[int]:
    """The document counts table G's paired bpb read, sorted (empty: bpb measured before the paired
    measure, by the paper's protocol)."""
    return sorted({r.documents for e in g.configs for r in e.rows if r.documents is not None})


def retrieval_lines(doc: StudyResults, group: str | None = "trained") -> list[RetrievalLine]:
    """Table G's configurations, one per (label, pattern) in ``group`` (:data:`GROUPS`; None: one
    per (label, pattern, group), trained first); empty when the study ran none."""
    g = section(doc)
    if g is None:
        return []
    by: dict[tuple[str, str, str], list] = {}
    for entry in g.configs:
        by.setdefault((entry.label, entry.pattern, _group(entry)), []).append(entry)
    pooled = {key: _pooled(entries, g.train_len) for key, entries in by.items()}
    out = []
    for (label, pattern, formats), entries in by.items():
        if group is not None and formats != group:
            continue
        first, p = entries[0], pooled[(label, pattern, formats)]
        trained = pooled.get((label, pattern, "trained"), p)["accuracy"]
        out.append(RetrievalLine(label, pattern, first.origin, first.scheme, first.run, p["accuracy"], p["per_seed"],
                                 p["over_seeds"], p["over_needles"], p["answer_bits"], p["bpb"], p["worst_depth"],
                                 formats, len({e.seed for e in entries}), p["needles"],
                                 tuple(dict.fromkeys(e.format for e in entries)), p["by_format"],
                                 trained.get(min(trained, default=1), 0.0) >= RETRIEVES, first.training,
                                 p["bpb_ratio"], p["guess"], p["candidate"]))
    order = {key[:2]: i for i, key in reversed(list(enumerate(by)))}  # where each (label, pattern) came first
    return sorted(out, key=lambda r: (order[r.label, r.pattern], GROUPS.index(r.group)))


def held_out_scored(doc: StudyResults) -> bool:
    """Whether table G scored held-out formats (a study before them scored the trained one alone)."""
    g = section(doc)
    return g is not None and any(e.held_out for e in g.configs)


def separated(a: RetrievalLine, b: RetrievalLine, m: int) -> bool:
    """Whether two lines differ at multiple ``m`` beyond doubt: their intervals (:func:`interval`:
    over seeds when they have several) do not overlap."""
    if m not in a.accuracy or m not in b.accuracy:
        return False
    lo, hi = (a, b) if a.accuracy[m] < b.accuracy[m] else (b, a)
    return interval(lo, m)[1] < interval(hi, m)[0]


def stops_at(line: RetrievalLine, level: float = RETRIEVES) -> int | None:
    """The first multiple of the training length at which ``line`` retrieves below ``level`` over
    all depths (1 when it never retrieves); None when it keeps ``level`` at every multiple measured."""
    return next((m for m in sorted(line.accuracy) if line.accuracy[m] < level), None)


def far_ratio(line: RetrievalLine, far: int) -> tuple[float | None, float | None, float | None]:
    """``(ratio, low, high)`` of bpb at ``far`` over bpb at 1x: the paired measure with its interval
    (:attr:`RetrievalLine.bpb_ratio`), else (results measured before it) the ratio of the two
    means with no interval; Nones where bpb was not measured."""
    if far in line.bpb_ratio:
        return line.bpb_ratio[far]
    one, long = line.bpb.get(1), line.bpb.get(far)
    return (long / one if one and long is not None else None), None, None


def flatness(ratio: float | None, high: float | None) -> bool | None:
    """Whether bpb far is within :data:`FLAT` of 1x, by the documented rule (docs/evaluation.md): True
    only when the ratio's interval has its upper end ``high`` at most 1 + FLAT (one that straddles the
    bound has not shown flatness); False when that upper end, or without an interval the ratio itself
    (which no interval's upper end can be below), is above it; None, *undetermined*, for a ratio
    within the bound with no interval to show it (one document, or bpb measured before the paired
    measure) or no ratio at all."""
    if ratio is None:
        return None
    if high is not None:
        return high <= 1 + FLAT
    return False if ratio > 1 + FLAT else None


def is_flat(ratio: float | None, high: float | None) -> bool:
    """Flat by the documented rule (:func:`flatness` True): the ratio's interval's upper end within
    :data:`FLAT`; a ratio without an interval is never flat (undetermined, :func:`flatness` None)."""
    return flatness(ratio, high) is True


@dataclasses.dataclass(frozen=True)
class Scored:
    """A :class:`RetrievalLine` against the goal at the longest multiple: ``ratio`` = bpb far / bpb
    1x (paired, :func:`far_ratio`) with its interval ``ratio_low``..``ratio_high`` (None without
    one), ``flat`` (:func:`is_flat`), ``worst`` (its lowest exact match far of any one depth of any one
    format, :func:`goal_worst`), ``met``,
    ``reach``, the longest multiple up to which every depth keeps :data:`RETRIEVES` (None when it
    does not at 1x), and ``shortfall``, its distance to the goal (:func:`shortfall`)."""

    line: RetrievalLine
    ratio: float | None
    flat: bool
    worst: float
    met: bool
    reach: int | None
    ratio_low: float | None = None
    ratio_high: float | None = None

    @property
    def bpb_shortfall(self) -> float:
        """How far bpb is from flat, relative: (upper end of the ratio's interval, or the ratio) over
        1 + :data:`FLAT`, minus 1, at least 0; 1 (all the way) where it was not measured."""
        if self.ratio is None:
            return 1.0
        top = self.ratio if self.ratio_high is None else self.ratio_high
        return max(0.0, top / (1 + FLAT) - 1)

    @property
    def retrieval_shortfall(self) -> float:
        """How far the worst depth's exact match is from :data:`RETRIEVES`, relative, at least 0."""
        return max(0.0, 1 - self.worst / RETRIEVES)

    @property
    def shortfall(self) -> float:
        """The distance to the goal: the larger of the two relative shortfalls (0 for a
        configuration that meets both targets), so neither target is a gate the other passes."""
        return max(self.bpb_shortfall, self.retrieval_shortfall)


@dataclasses.dataclass(frozen=True)
class ContextGoal:
    """The goal of table G measured: ``met`` (the configurations that meet it), and among the
    configurations that learned the skill (``ranked``; every configuration is ``scored``) the
    ``nearest`` (the least :attr:`Scored.shortfall`: the larger of its relative shortfalls from flat
    bpb and from retrieval at every depth; ties to the better retrieval), ``best_retrieval``
    (whatever its bpb) and ``longest_reach``; these three are None when no configuration learned
    (nothing is ranked then)."""

    multiple: int
    scored: list[Scored]
    met: list[str]
    ranked: list[Scored]
    nearest: Scored | None
    best_retrieval: Scored | None
    longest_reach: Scored | None


def _reach(worst_depth: dict[int, float]) -> int | None:
    """The longest multiple up to which every depth keeps :data:`RETRIEVES` (None below it at the first)."""
    held = sorted(worst_depth)
    if not held or worst_depth[held[0]] < RETRIEVES:
        return None
    return next((held[i - 1] for i, m in enumerate(held) if worst_depth[m] < RETRIEVES), held[-1])


def context_goal(doc: StudyResults) -> ContextGoal | None:
    """The stated goal of table G: a configuration whose bpb at the longest multiple (16x) is
    within :data:`FLAT` of its own bpb at 1x, shown by its interval (:func:`is_flat`), *and* whose
    exact match there is at least :data:`RETRIEVES` at every depth of every held-out format, each
    format's own worst depth (:func:`goal_worst`; the skill; on the trained format in a study that
    scored no held-out one); None when the study ran no table G. A configuration that did not learn
    the skill at 1x (:attr:`RetrievalLine.learned`) is scored but never ranked: with none that
    learned, there is no nearest, best or longest reach."""
    lines = retrieval_lines(doc, "held-out" if held_out_scored(doc) else "trained")
    if not lines:
        return None
    far = max(section(doc).multiples)
    scored = []
    for line in lines:
        ratio, low, high = far_ratio(line, far)
        flat = is_flat(ratio, high)
        worst = goal_worst([line], far)
        worst = 0.0 if worst is None else worst
        met = flat and worst >= RETRIEVES and line.learned
        scored.append(Scored(line, ratio, flat, worst, met, _reach(line.worst_depth), low, high))

    def rank(s: Scored):  # better retrieval first, then flatter
        return s.worst, s.line.accuracy.get(far, 0.0), -(s.ratio if s.ratio is not None else float("inf"))

    ranked = [s for s in scored if s.line.learned]
    met = [s for s in ranked if s.met]
    nearest = min(ranked, key=lambda s: (s.shortfall, tuple(-v for v in rank(s))), default=None)
    reaching = [s for s in ranked if s.reach is not None]
    return ContextGoal(far, scored, [f"{s.line.label} ({s.line.pattern})" for s in met], ranked, nearest,
                       max(ranked, key=rank, default=None),
                       max(reaching, key=lambda s: (s.reach, s.line.accuracy.get(s.reach, 0)), default=None))


def scalars(doc: StudyResults) -> dict:
    """What TensorBoard shows of table G: nothing yet (its numbers are exact match by length and depth)."""
    return {}
