"""What the study report says in words: each finding a sentence computed from results.json through
:mod:`lexkit.results`, so the prose can never contradict the tables beside it. Plain strings (with
``**bold**``); the document (:mod:`lexkit.report.sections`) places them."""

from __future__ import annotations

from .. import results as query
from ..formats import multiple, signed
from ..rows import StudyResults

#: A bpb difference below this reads as "no clear change" in the report's findings.
CLEAR = 0.005


def extension_findings(doc: StudyResults) -> list[str]:
    """One line per no-fine-tune method: what it costs at 1x and what it gives at the longest
    length, against plain rope under causal attention (where a method loses is said)."""
    t, far = doc.train_len, max(doc.lengths)
    lines = query.extension_lines(doc)
    base = next((r for r in lines if r.label == "rope" and r.pattern == "causal" and not r.logn), None)
    if base is None or t not in doc.lengths or base.bpb[t][0] is None or base.bpb[far][0] is None:
        return []
    out = []
    for line in lines:
        if line is base or line.finetune is not None:
            continue
        at_one, at_far = line.bpb[t][0], line.bpb[far][0]
        if at_one is None or at_far is None:
            continue
        d_one, d_far = at_one - base.bpb[t][0], at_far - base.bpb[far][0]
        past = ("helps past the training length" if d_far < -CLEAR else
                "loses past the training length" if d_far > CLEAR else "no clear change past the training length")
        inside = "; costs inside it" if d_one > CLEAR else ("; also helps inside it" if d_one < -CLEAR else "")
        out.append(f"{line.label} ({line.pattern}): "
                   f"{signed(d_one)} bpb at {t} (1x), {signed(d_far)} at {far} against plain rope: {past + inside}.")
    return out


def goal_finding(doc: StudyResults) -> str | None:
    """F: the configuration with the lowest bpb at 16x, and its margin below the best bpb any
    trained scheme reaches at 1x (None when either length is missing)."""
    g = query.goal(doc)
    if g is None:
        return None
    best, one, t = g.best, g.one_x, doc.train_len
    verdict = "met" if g.margin >= 0.05 else "not met"
    caveat = ""
    own = best.config.bpb.get(t)
    if best.config.finetuned and own is not None:
        caveat = (f" That configuration was fine-tuned, so it also had more training than the 1x reference; "
                  f"against its own bpb at 1x ({own:.3f}) the gain from the longer context alone is "
                  f"{100 * (own - best.value) / own:.1f} %.")
    return (f"Of every configuration measured (tables A, B and E), the lowest bpb at {g.length} bytes "
            f"({multiple(g.length, t)}) is **{best.value:.3f}**: {best.config.name} under {best.config.pattern}"
            f"{' (fine-tuned)' if best.config.finetuned else ''}. The best any trained scheme reaches at {t} "
            f"bytes (1x) is {one.value:.3f} ({one.config.name} under {one.config.pattern}). Margin: "
            f"**{100 * g.margin:.1f} %** below (the aim is at least 5 %: {verdict}). Found by taking the "
            "minimum over every configuration of the study (lexkit.results.goal); a longer search is a "
            "matter of adding configurations to lexkit.extension." + caveat)


def retrieval_findings(doc: StudyResults) -> list[str]:
    """One line per configuration that loses the skill: where it stops retrieving (below 90 %
    exact match over all depths), with what it keeps at 16x and its bpb there."""
    far = max(doc.retrieval.multiples)
    out = []
    for line in query.retrieval_lines(doc):
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
        out.append(f"{line.label} ({line.pattern}): {where}; {100 * acc[far]:.0f} % at {far}x"
                   + (f", where its bpb is {bpb:.3f}" if bpb is not None else "") + ".")
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
           f"{100 * query.RETRIEVES:.0f} % exact match at {far}x at every depth")
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
