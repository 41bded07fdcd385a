"""What table G's section says in words: each finding a sentence computed from results.json through
:mod:`.queries`, so the prose can never contradict the tables beside it. Plain strings (with
``**bold**``); :mod:`.report` places them."""

from __future__ import annotations

from ....core.notation import ratio_with_interval
from ...schema import StudyResults
from . import queries as query
from .rows import TRAINED, section


def retrieval_findings(doc: StudyResults) -> list[str]:
    """One line per configuration that loses the skill: where it stops retrieving (below 90 %
    exact match over all depths), with what it keeps at 16x and its bpb there; in the trained
    format, then (when scored) in the held-out formats."""
    far = max(section(doc).multiples)
    out = []
    for group in query.GROUPS if query.held_out_scored(doc) else ("trained",):
        suffix = " (held-out formats)" if group == "held-out" else ""
        for line in query.retrieval_lines(doc, group):
            stop = query.stops_at(line)
            if stop is None:
                continue
            acc = line.accuracy
            first, best = min(acc), max(acc, key=lambda m: (acc[m], -m))
            if stop != first:
                where = f"retrieves {100 * acc[first]:.0f} % at {first}x, stops at {stop}x ({100 * acc[stop]:.0f} %)"
            elif acc[best] > 0:
                where = f"never reaches 90 % (best {100 * acc[best]:.0f} % at {best}x)"
            else:
                where = "retrieves nothing at any length"
            bpb = line.bpb.get(far)
            out.append(f"{line.label} ({line.pattern}){suffix}: {where}; {100 * acc[far]:.0f} % at {far}x"
                       + (f", where its bpb is {bpb:.3f}" if bpb is not None else "") + ".")
    return out


def _pct(line: query.RetrievalLine, m: int) -> str:
    """Exact match at ``m`` with the interval every finding rests on (:func:`.queries.interval`,
    named), and the seeds' range when there are several."""
    low, high = query.interval(line, m)
    seeds = (f"; seeds {100 * line.spread[m][0]:.0f}-{100 * line.spread[m][1]:.0f} %" if line.seeds > 1 else "")
    return f"{100 * line.accuracy[m]:.0f} % [{100 * low:.0f}-{100 * high:.0f}, {query.interval_kind(line)}{seeds}]"


def _pairs(doc: StudyResults) -> list[tuple[query.RetrievalLine, query.RetrievalLine | None]]:
    """(trained line, held-out line or None) per configuration and pattern."""
    held = {(r.label, r.pattern): r for r in query.retrieval_lines(doc, "held-out")}
    return [(r, held.get((r.label, r.pattern))) for r in query.retrieval_lines(doc, "trained")]


def _at_1x(pair: tuple) -> tuple:
    """What a (trained, held-out) pair measured at 1x, seed by seed."""
    return tuple(None if line is None else line.per_seed.get(1) for line in pair)


def said_once_at_1x(pairs: list[tuple]) -> set[tuple[str, str]]:
    """The (label, pattern) pairs whose 1x is said once for their configuration: each one but the
    first of a configuration whose every pattern measured the same at 1x (every study pattern sees
    the whole text at the training length, so a finding there holds for all of them)."""
    by_label: dict[str, list[tuple]] = {}
    for pair in pairs:
        by_label.setdefault(pair[0].label, []).append(pair)
    return {(label, pair[0].pattern) for label, mine in by_label.items()
            if len({_at_1x(pair) for pair in mine}) == 1 for pair in mine[1:]}


def learning_findings(doc: StudyResults) -> list[str]:
    """One line per configuration (its first pattern: at 1x every pattern sees the whole text):
    whether it **learned the skill** (at least 90 % on the trained formats at 1x, mean over seeds,
    with its interval) and how it **generalizes** (each held-out format's exact match at 1x, a
    number per format, not a gate). A configuration that did not learn is not ranked past 1x."""
    out, seen = [], set()
    bar = f"{100 * query.RETRIEVES:.0f} %"
    for trained, held in _pairs(doc):
        if trained.label in seen:
            continue
        seen.add(trained.label)
        one = min(trained.accuracy)
        if trained.learned:
            what = f"**learned** at {one}x (trained format {_pct(trained, one)}, at least {bar})"
        else:
            what = (f"**did not learn** at {one}x (trained format {_pct(trained, one)}, below {bar}); its longer "
                    "lengths are not ranked")
        if held is not None:
            each = ", ".join(f"{name} {100 * held.by_format[name][one]:.0f} %" for name in held.formats
                             if one in held.by_format.get(name, {}))
            seeds = f"mean over {held.seeds} seeds" if held.seeds > 1 else "one seed"
            what += f"; held-out formats at {one}x: {each} ({seeds})"
        out.append(f"{trained.label}: {what}.")
    return out


def findings_lines(doc: StudyResults) -> list[str]:
    """Where a configuration's skill is format-bound: the trained format retrieved (at least 90 %)
    and the held-out formats clearly not (their interval, :func:`.queries.interval`, below the
    trained one's), at each multiple; one line per configuration and pattern, 1x said once per
    configuration when its patterns measured the same there (:func:`said_once_at_1x`)."""
    pairs = [(trained, held) for trained, held in _pairs(doc) if held is not None]
    once = said_once_at_1x(pairs)
    out = []
    for trained, held in pairs:
        bound = [m for m in sorted(trained.accuracy) if m in held.accuracy
                 and (m != 1 or (trained.label, trained.pattern) not in once)
                 and trained.accuracy[m] >= query.RETRIEVES
                 and query.interval(held, m)[1] < query.interval(trained, m)[0]]
        merged = 1 in bound and any(label == trained.label for label, _ in once)  # 1x: for every pattern
        for where, multiples in ((("every pattern", [1]), (trained.pattern, bound[1:])) if merged
                                 else ((trained.pattern, bound),)):
            if multiples:
                what = "; ".join(f"{m}x: trained {_pct(trained, m)}, held-out {_pct(held, m)}" for m in multiples)
                out.append(f"{trained.label} ({where}): **format-bound** at {', '.join(f'{m}x' for m in multiples)}"
                           f" ({what}).")
    return out


def difference_findings(doc: StudyResults) -> list[str]:
    """Which rows differ beyond doubt (:func:`.queries.separated`: their intervals, over seeds,
    apart) on the held-out formats (the trained one when none was scored), at 1x, 2x and the
    longest multiple, among the rows as trained (origin ``trained``) that learned the skill: per
    pattern, 1x once for every pattern when they all measured the same there."""
    group = "held-out" if query.held_out_scored(doc) else "trained"
    lines = [r for r in query.retrieval_lines(doc, group) if r.origin == TRAINED and r.learned]
    patterns = list(dict.fromkeys(r.pattern for r in lines))
    by_label: dict[str, set] = {}
    for r in lines:
        by_label.setdefault(r.label, set()).add(r.per_seed.get(1))
    one_for_all = len(patterns) > 1 and all(len(v) == 1 for v in by_label.values())
    out, multiples = [], section(doc).multiples
    for pattern in patterns:
        here = [r for r in lines if r.pattern == pattern]
        for m in sorted({1, 2, max(multiples)} & set(multiples)):
            if m == 1 and one_for_all and pattern != patterns[0]:
                continue
            ranked = sorted((r for r in here if m in r.accuracy), key=lambda r: -r.accuracy[m])
            apart = [f"{a.label} > {b.label}" for i, a in enumerate(ranked) for b in ranked[i + 1:]
                     if query.separated(a, b, m)]
            if len(ranked) < 2:
                continue
            order = ", ".join(f"{r.label} {100 * r.accuracy[m]:.0f} %" for r in ranked)
            where = "every pattern" if m == 1 and one_for_all else pattern
            out.append(f"{where} at {m}x ({order}): "
                       + (f"apart beyond doubt: {'; '.join(apart)}." if apart else "no two rows apart beyond doubt."))
    return out


def _described(s: query.Scored, far: int) -> str:
    ratio = "n/a" if s.ratio is None else ratio_with_interval(s.ratio, s.ratio_low, s.ratio_high)
    return (f"{s.line.label} ({s.line.pattern}): bpb {far}x / 1x {ratio}, exact match at {far}x "
            f"{100 * s.line.accuracy.get(far, 0):.0f} % over all depths, {100 * s.worst:.0f} % at its worst depth")


def context_goal_finding(doc: StudyResults) -> str | None:
    """The goal of table G, stated and measured: met by which configuration, or how far the
    nearest one is (None without table G)."""
    g = query.context_goal(doc)
    if g is None:
        return None
    far = g.multiple
    aim = (f"bpb at {far}x within {100 * query.FLAT:.0f} % of its own bpb at 1x and at least "
           f"{100 * query.RETRIEVES:.0f} % exact match at {far}x at every depth"
           + (" of every held-out format (each format's own worst depth)" if query.held_out_scored(doc) else "")
           + f", ranked among the configurations that learned the skill (at least {100 * query.RETRIEVES:.0f} % "
           "on the trained formats at 1x)")
    near = g.nearest
    if g.met:
        verdict = f"**met** by {', '.join(g.met)}. Best: {_described(near, far)}."
    elif near is None:
        verdict = ("**not met**, and nothing is ranked: no configuration learned the skill at 1x (none of "
                   f"the {len(g.scored)} configurations and patterns scored).")
    else:
        gaps = []
        if near.ratio is None:
            gaps.append("bpb not measured")
        elif query.flatness(near.ratio, near.ratio_high) is None:
            gaps.append(f"bpb {ratio_with_interval(near.ratio, None, None)}x its 1x with no interval: flatness "
                        "undetermined, so not flat")
        elif not near.flat:
            gaps.append(f"bpb {100 * (near.ratio - 1):.1f} % above its 1x"
                        + ("" if near.ratio_high is None else
                           f" (the interval's top {100 * (near.ratio_high - 1):.1f} %)"))
        gaps.append(f"{100 * (query.RETRIEVES - near.worst):.0f} points short of "
                    f"{100 * query.RETRIEVES:.0f} % at its worst depth")
        verdict = (f"**not met**. Nearest, by the larger of its two relative shortfalls (bpb's ratio, or its "
                   f"interval's top, over {1 + query.FLAT:.2f}; the worst depth's exact match under "
                   f"{100 * query.RETRIEVES:.0f} %), {100 * near.shortfall:.0f} % short: {_described(near, far)} "
                   f"({'; '.join(gaps)}).")
        if g.best_retrieval is not near:
            verdict += f" Best retrieval at {far}x whatever its bpb: {_described(g.best_retrieval, far)}."
    reach = g.longest_reach
    if reach is not None and reach.reach < far:
        verdict += (f" The longest length at which any of them still retrieves at least "
                    f"{100 * query.RETRIEVES:.0f} % at every depth: {reach.reach}x "
                    f"({reach.line.label}, {reach.line.pattern}).")
    return f"The goal ({aim}; nothing tuned on the evaluation needles): {verdict}"
