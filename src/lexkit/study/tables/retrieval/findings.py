"""What table G's section says in words: each finding a sentence computed from results.json through
:mod:`.queries`, so the prose can never contradict the tables beside it. Plain strings (with
``**bold**``); :mod:`.report` places them."""

from __future__ import annotations

from ....rows import StudyResults
from . import queries as query
from .rows import section


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
    """Exact match at ``m`` with its 95 % interval (and the seeds' range when several)."""
    seeds = (f", seeds {100 * line.spread[m][0]:.0f}-{100 * line.spread[m][1]:.0f} %"
             if line.seeds > 1 else "")
    return f"{100 * line.accuracy[m]:.0f} % [{100 * line.low[m]:.0f}-{100 * line.high[m]:.0f}{seeds}]"


def _pairs(doc: StudyResults) -> list[tuple[query.RetrievalLine, query.RetrievalLine | None]]:
    """(trained line, held-out line or None) per configuration and pattern."""
    held = {(r.label, r.pattern): r for r in query.retrieval_lines(doc, "held-out")}
    return [(r, held.get((r.label, r.pattern))) for r in query.retrieval_lines(doc, "trained")]


def learning_findings(doc: StudyResults) -> list[str]:
    """One line per configuration (its first pattern: at 1x every pattern sees the whole text) that
    did not learn the skill at 1x: below 90 % exact match on the held-out formats (the trained one
    when none was scored). Its cells past 1x are not ranked."""
    out, seen = [], set()
    for trained, held in _pairs(doc):
        line = held or trained
        if line.label in seen or line.learned:
            continue
        seen.add(line.label)
        one = min(line.accuracy)
        what = (f"held-out formats {_pct(held, one)}, trained format {_pct(trained, one)}" if held
                else f"{_pct(trained, one)}")
        out.append(f"{line.label}: **did not learn at {one}x** ({what}); its longer lengths are not ranked.")
    return out


def format_findings(doc: StudyResults) -> list[str]:
    """Where a configuration's skill is format-bound: the trained format retrieved (at least 90 %)
    and the held-out formats clearly not (their interval below the trained one's), at each
    multiple; one line per configuration and pattern."""
    out = []
    for trained, held in _pairs(doc):
        if held is None:
            continue
        bound = [m for m in sorted(trained.accuracy) if m in held.accuracy
                 and trained.accuracy[m] >= query.RETRIEVES and held.high[m] < trained.low[m]]
        if bound:
            where = "; ".join(f"{m}x: trained {_pct(trained, m)}, held-out {_pct(held, m)}" for m in bound)
            out.append(f"{trained.label} ({trained.pattern}): **format-bound** at {', '.join(f'{m}x' for m in bound)}"
                       f" ({where}).")
    return out


def difference_findings(doc: StudyResults) -> list[str]:
    """Which rows differ beyond doubt (:func:`.queries.separated`: 95 % intervals and seeds
    apart) on the held-out formats (the trained one when none was scored), per pattern, at 1x, 2x
    and the longest multiple, among the rows (kind ``scheme``) that learned at 1x."""
    group = "held-out" if query.held_out_scored(doc) else "trained"
    lines = [r for r in query.retrieval_lines(doc, group) if r.kind == "scheme" and r.learned]
    out, multiples = [], section(doc).multiples
    for pattern in dict.fromkeys(r.pattern for r in lines):
        here = [r for r in lines if r.pattern == pattern]
        for m in sorted({1, 2, max(multiples)} & set(multiples)):
            ranked = sorted((r for r in here if m in r.accuracy), key=lambda r: -r.accuracy[m])
            apart = [f"{a.label} > {b.label}" for i, a in enumerate(ranked) for b in ranked[i + 1:]
                     if query.separated(a, b, m)]
            if len(ranked) < 2:
                continue
            order = ", ".join(f"{r.label} {100 * r.accuracy[m]:.0f} %" for r in ranked)
            out.append(f"{pattern} at {m}x ({order}): "
                       + (f"apart beyond doubt: {'; '.join(apart)}." if apart else "no two rows apart beyond doubt."))
    return out


def _described(s: query.Scored, far: int) -> str:
    ratio = "n/a" if s.ratio is None else f"{s.ratio:.3f}"
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
           + (" on the held-out formats" if query.held_out_scored(doc) else "")
           + "; configurations that did not learn at 1x not ranked")
    if g.met:
        verdict = f"**met** by {', '.join(g.met)}. Best: {_described(g.nearest, far)}."
    else:
        near = g.nearest
        gaps = []
        if not near.flat:
            gaps.append("bpb " + ("not measured" if near.ratio is None
                                  else f"{100 * (near.ratio - 1):.1f} % above its 1x"))
        gaps.append(f"{100 * (query.RETRIEVES - near.worst):.0f} points short of "
                    f"{100 * query.RETRIEVES:.0f} % at its worst depth")
        verdict = f"**not met**. Nearest: {_described(near, far)} ({'; '.join(gaps)})."
        if g.best_retrieval is not near:
            verdict += f" Best retrieval at {far}x whatever its bpb: {_described(g.best_retrieval, far)}."
    reach = g.longest_reach
    if reach is not None and reach.reach < far:
        verdict += (f" The longest length at which any configuration still retrieves at least "
                    f"{100 * query.RETRIEVES:.0f} % at every depth: {reach.reach}x "
                    f"({reach.line.label}, {reach.line.pattern}).")
    return f"The goal ({aim}; nothing tuned on the evaluation needles): {verdict}"
