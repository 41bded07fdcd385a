"""Table E's part of the report: section E (the context-extension configurations beside the grid's
rope and xpos rows, and a line per method against plain rope) and section F (the stated goal), from
results.json through :mod:`.queries` alone."""

from __future__ import annotations

from ....core.notation import length_label, multiple, signed
from ....documents.blocks import Block, Figure, Heading, Table, Text
from ... import results as query
from ...report.sections import listed
from ...report.tables import LOWEST_BPB, cell
from ...schema import StudyResults
from .queries import extension_lines, goal
from .rows import section

#: A bpb difference below this reads as "no clear change" in the report's findings.
CLEAR = 0.005


def blocks(doc: StudyResults) -> list[Block]:
    """Sections E (context extension) and F (the stated goal), when the study ran them."""
    ext = section(doc)
    if not ext:
        return []
    out = [
        Heading("E. Context extension: stretching RoPE, beside local attention and xPos"),
        Text(f"The study's `rope` run evaluated without retraining under each method (every scaling set "
             f"for the longest length: factor {ext.factor:.3g}), " + (
                 f"and fine-tuned for {ext.finetune_steps} steps at {ext.finetune_len} bytes "
                 f"({multiple(ext.finetune_len, doc.train_len)}) with `--init` under no scaling, PI and YaRN, each "
                 "evaluated under causal attention and under window/BCA at its new length" if ext.finetune_steps
                 else "not fine-tuned (`--extension-steps 0`, a study at the quick preset's default: the "
                 "fine-tunes at 4x are in `make study`)") + ". Bits per byte; the same bytes at every length."),
        extension_table(doc),
        Figure("extension.png", "context extension"),
    ]
    out += listed("Against plain rope under causal attention (lower is better):", extension_findings(doc))
    stated = goal_finding(doc)
    return out + ([Heading("F. The stated goal: context that is used"), Text(stated)] if stated is not None else [])


def extension_table(doc: StudyResults) -> Table:
    """E: the context-extension configurations of the rope run (bpb by length), then the main
    grid's rope and xpos rows for reference."""
    t = doc.train_len
    header = ["configuration", "pattern"] + [length_label(n, t) for n in doc.lengths]
    rows = [[line.label, line.pattern] + [cell(*line.bpb[n]) for n in doc.lengths]
            for line in extension_lines(doc)]
    for label in ("rope", "xpos"):
        if label in query.labels(doc):
            rows += [[f"{label} (tables A, B)", pattern]
                     + [cell(*query.evaluation(doc, label, pattern, n)) for n in doc.lengths]
                     for pattern in doc.patterns]
    return Table.of(header, rows, "min", LOWEST_BPB)


def extension_findings(doc: StudyResults) -> list[str]:
    """One line per no-fine-tune method: what it costs at 1x and what it gives at the longest
    length, against plain rope under causal attention (where a method loses is said)."""
    t, far = doc.train_len, max(doc.lengths)
    lines = extension_lines(doc)
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
    """F: the curve with the lowest bpb at 16x, and its margin below the best bpb any row of the
    grid reaches at 1x (None when either length is missing)."""
    g = goal(doc)
    if g is None:
        return None
    best, one, t = g.best, g.one_x, doc.train_len
    verdict = "met" if g.margin >= 0.05 else "not met"
    caveat = ""
    own = best.curve.bpb.get(t)
    if best.curve.finetuned and own is not None:
        caveat = (f" That configuration was fine-tuned, so it also had more training than the 1x reference; "
                  f"against its own bpb at 1x ({own:.3f}) the gain from the longer context alone is "
                  f"{100 * (own - best.value) / own:.1f} %.")
    return (f"Of every configuration measured (tables A, B and E), the lowest bpb at {g.length} bytes "
            f"({multiple(g.length, t)}) is **{best.value:.3f}**: {best.curve.name} under {best.curve.pattern}"
            f"{' (fine-tuned)' if best.curve.finetuned else ''}. The best any row of the grid (a scheme or a "
            f"layout) reaches at {t} bytes (1x) is {one.value:.3f} ({one.curve.name} under {one.curve.pattern}). "
            f"Margin: **{100 * g.margin:.1f} %** below (the aim is at least 5 %: {verdict}). Found by taking the "
            "minimum over every configuration of the study (lexkit.study.tables.extension.queries.goal); a longer "
            "search is a matter of adding configurations to lexkit.study.tables.extension.configurations." + caveat)
