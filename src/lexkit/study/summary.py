"""The study in the README: its summary tables and the goals of sections F and G, written from a
study's results.json by the report's own queries, tables and sentences (one source for both: the README says what
the report says). ``lexkit study --readme README.md`` rewrites the README's block between
:data:`BEGIN` and :data:`END` from ``OUT/results.json``; nothing else of the file changes."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import LexkitError
from ..core.notation import multiple
from ..documents.blocks import Block, Table, Text
from ..documents.render import markdown
from . import results as query
from .report.tables import cell
from .schema import StudyResults
from .tables.extension.queries import ExtensionLine, extension_lines
from .tables.extension.report import goal_finding
from .tables.retrieval.findings import context_goal_finding
from .tables.retrieval.report import retrieval_table
from .tables.retrieval.rows import section

BEGIN = "<!-- lexkit study --readme: from here to the end mark, written from a study's results.json -->"
END = "<!-- end of what lexkit study --readme writes -->"


def grid_table(doc: StudyResults) -> Table:
    """Every row of the grid: bpb at 1x (causal), at the far length under every pattern, and the
    empirical R (causal) from 1x to the longest length measured (tables A, B and C's numbers)."""
    t, far, r_far = doc.train_len, query.far_length(doc), max(doc.resolution_lengths)
    header = ["scheme", f"bpb at {t}"] + [f"{far}, {p}" for p in doc.patterns] + [
        f"empirical R {t} → {r_far} (causal)"]
    rows = []
    for label in query.labels(doc):
        r = [query.empirical_resolution(doc, label, "causal", n)[0] for n in (t, r_far)]
        rows.append([label, cell(*query.evaluation(doc, label, "causal", t))]
                    + [cell(*query.evaluation(doc, label, p, far)) for p in doc.patterns]
                    + [" → ".join(cell(v).text for v in r)])
    return Table.of(header, rows)


def shown(lines: list[ExtensionLine], far: int) -> list[ExtensionLine]:
    """Table E's lines the README shows: plain rope, the position interpolations (PI, YaRN, dynamic
    NTK), leaky ReRoPE without and with log-n, the sinks at cache positions, and the fine-tune with
    the lowest bpb at the far length."""
    def picked(line: ExtensionLine) -> bool:
        s = line.scheme
        return line.finetune is None and (
            (s == "rope" and line.pattern == "causal" and not line.logn)
            or any(f"scaling={kind}," in s for kind in ("linear", "yarn", "dynamic"))
            or (s.startswith("rerope:") and ",k=" in s) or "pos=cache" in line.pattern)

    tuned = [line for line in lines if line.finetune is not None and line.bpb[far][0] is not None]
    best = min(tuned, key=lambda line: line.bpb[far][0], default=None)
    return [line for line in lines if picked(line)] + ([best] if best is not None else [])


def extension_table(doc: StudyResults) -> Table:
    """Table E on the rope run, the lines :func:`shown` picks: bpb at 1x and at the far length."""
    t, far = doc.train_len, query.far_length(doc)
    rows = [[line.label + ("" if line.pattern == "causal" or line.pattern.split(",")[0] in line.label
                           else f", `{line.pattern}`"), cell(*line.bpb[t]), cell(*line.bpb[far])]
            for line in shown(extension_lines(doc), far)]
    return Table.of(["method", f"{t} ({multiple(t, t)})", f"{far} ({multiple(far, t)})"], rows)


def blocks(doc: StudyResults) -> list[Block]:
    """The README's summary of a study: the grid, table E and the goal of section F, then table G as
    the report has it and its goal."""
    t, far = doc.train_len, query.far_length(doc)
    docs = doc.runs[0].eval.documents if doc.runs else 0
    out = [Text(f"Bits per byte on {docs} validation document{'s' if docs != 1 else ''} (lower is better) at {t} "
                f"bytes (1x, causal) and "
                f"at {far} ({multiple(far, t)}) under each pattern; empirical resolution under causal attention:"),
           grid_table(doc)]
    if extension_lines(doc):
        out += [Text(f"Context extension on the same rope run (table E; bpb at {t} → {far}, causal unless named):"),
                extension_table(doc)]
    goal = goal_finding(doc)
    out += [Text(goal)] if goal is not None else []
    g = section(doc)
    if g:
        out += [Text(f"Use of context (table G: copy needles at 1-{max(g.multiples)}x in the trained and the held-out "
                     f"formats, {g.seeds} seed{'s' if g.seeds != 1 else ''} a row, the report's section G; exact "
                     "match in %):"), retrieval_table(doc)]
        found = context_goal_finding(doc)
        out += [Text(found)] if found is not None else []
    return out


def summary(doc: StudyResults | dict) -> str:
    """The block the README holds, markers included."""
    return f"{BEGIN}\n\n{markdown(blocks(query.read(doc)))}\n{END}"


def write_into(path: str | Path, doc: StudyResults | dict) -> None:
    """Rewrite the block between :data:`BEGIN` and :data:`END` of the file ``path`` from ``doc``."""
    path = Path(path)
    text = path.read_text()
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise LexkitError(f"{path} has no block to write: it needs the lines {BEGIN!r} and {END!r}, once each, "
                          "in that order")
    head, rest = text.split(BEGIN, 1)
    path.write_text(head + summary(doc) + rest.split(END, 1)[1])
