"""The study report as one document: its sections in order, each a heading, a few sentences of what
was measured, the tables (:mod:`.tables`) and the figures (:mod:`lexkit.documents.plots`), all from
results.json alone (no model, no scheme is built here), so a report can be rebuilt without the
runs. The grid's sections (A-D) are here; each table beside the grid brings its own (:class:`Part`:
its blocks and figures), as registered (:data:`lexkit.study.schema.TABLES`; ``import lexkit.study``
registers tables E and G). :func:`write_report` renders the document as ``report.md`` and as one
self-contained ``report.html`` (:mod:`lexkit.documents.html`), beside the figures and ``results.csv``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ...core.notation import count
from ...documents.blocks import Block, Bullets, Figure, Heading, Text
from ...documents.html import html
from ...documents.render import csv_text, markdown
from ...training.runs import atomic_write
from .. import results as query
from ..schema import TABLES, StudyResults
from . import figures as grid_figures
from . import tables

#: the columns of results.csv, one row per evaluation cell of every seed's run
CSV_FIELDS = ("scheme", "seed", "pattern", "length", "bpb", "ppl", "bytes", "unavailable")


class Part(Protocol):
    """What the report takes of a table beside the grid: its sections (:meth:`blocks`, none when
    its section of results.json is empty) and its figures (file name -> ``draw(results, path)``)."""

    figures: dict[str, Callable[[StudyResults, Any], None]]

    @staticmethod
    def blocks(doc: StudyResults) -> list[Block]: ...


def document(results: StudyResults | dict) -> list[Block]:
    """The report, block by block: the grid's sections, each table's (:data:`lexkit.study.schema.TABLES`, in
    order), the paper's numbers and the provenance."""
    doc = query.read(results)
    parts: list[Part] = TABLES
    return [*grid_sections(doc), *[block for part in parts for block in part.blocks(doc)],
            Heading("The paper's numbers, for orientation"),
            Text("A different model (24 layers, hidden 1024), data (a Pile subset, BPE tokens) and scale: compare "
                 "shapes and orderings, not values."),
            *[block for title, table in tables.paper_tables() for block in (Text(f"**{title}**"), table)],
            Heading("Provenance"),
            tables.provenance_table(doc)]


def grid_sections(doc: StudyResults) -> list[Block]:
    """The title, then sections A-D: the main grid of schemes, patterns and lengths."""
    t, m, train = doc.train_len, doc.model, doc.train
    note = " (mean ± std over seeds)" if doc.config["seeds"] > 1 else ""
    docs = doc.runs[0].eval.documents if doc.runs else 0
    per_doc = doc.runs[0].eval.bytes_per_document if doc.runs else 0
    return [
        Heading("lexkit study report", 1),
        Text(f"Byte-level decoders ({m['n_layers']} layers, width {m['d_model']}, {m['n_heads']} heads, "
             f"{doc.params:,} parameters) trained at **{t} bytes** for {train['steps']} steps "
             f"(batch {train['batch']}), evaluated at {', '.join(map(str, doc.lengths))} bytes under "
             f"{', '.join(doc.patterns)}. Every length scores the same bytes: the first "
             f"{per_doc:,} bytes of {count(docs, 'validation document')} (the paper's protocol). Numbers are bits "
             f"per byte (lower is better){note}."),
        Figure("bpb_by_length.png", "bpb by length"),
        Heading("A. Perplexity by length, causal attention (the paper's Table 2 layout)"),
        Text("Bits per byte; columns past the training length (1x) are extrapolation."),
        tables.length_table(doc),
        Text("Perplexity per byte (e^NLL):"),
        tables.length_table(doc, "ppl"),
        Heading("B. Relative schemes under each attention pattern beyond the training length (Table 5 layout)"),
        Text("window:W is the essay's super-strong baseline (each query sees the last W keys); bca:W is the "
             "paper's blockwise causal attention (blocks of W/2, each sees itself and the previous block)."),
        tables.pattern_table(doc),
        Heading("C. Attention resolution (Table 3 layout)"),
        Text("Analytic: from the encoding alone, before training (learnable biases at their initial values); "
             "empirical: measured per layer on the trained model (mean over heads, then layers) on "
             f"{doc.config['resolution_texts']} validation texts. R lies in [0, 1] for any curve, so the "
             "paper's 1.08 for xPos+BCA cannot come from the formula as printed."),
        tables.resolution_table(doc),
        *([Text("A layout's R above is the mean over its layers; each layer's (layer 0 first, as the layout "
                "is written):"), tables.layer_resolution_table(doc)] if query.layouts(doc) else []),
        Figure("s_curves.png", "s[n] curves"),
        Figure("resolution_per_layer.png", "resolution per layer"),
        Figure("entropy.png", "entropy"),
        Heading("D. The design principles, measured"),
        Text("Order variance: max |f(PX) − Pf(X)| / max|f(X)| for a random permutation P (0 = bag of words). "
             f"Translation Δ: max change of the logits under a position offset of {t // 2}, relative (≈0 for "
             "relative schemes). Extrapolation: bpb at 4x and 16x over bpb at 1x under causal attention "
             "(≤ 1 extrapolates). Beyond − inside: bpb of positions past the training length minus bpb of the "
             "last bucket inside it, at the longest length (negative: the model uses the extra context, "
             "*A Length-Extrapolatable Transformer*'s \"not exploding is not extrapolating\")."),
        tables.principles_table(doc),
        Figure("loss_by_position.png", "loss by position"),
    ]


def listed(intro: str, items: list[str]) -> list[Block]:
    """``items`` as bullets after ``intro``; nothing when there are none."""
    return [Text(intro), Bullets(items)] if items else []


def report_figures(results: StudyResults | dict, out: str | Path | None = None) -> dict[str, bytes]:
    """Every figure of the report, the grid's (:data:`.figures.GRID_FIGURES`) then each table's:
    file name -> PNG bytes (:func:`.figures.draw`), also written into ``out`` when given."""
    figures = dict(grid_figures.GRID_FIGURES)
    parts: list[Part] = TABLES
    for part in parts:
        figures.update(part.figures)
    return grid_figures.draw(figures, results, out)


def write_report(results: StudyResults | dict, out: str | Path) -> None:
    """In the directory ``out``: the figures (:func:`report_figures`), ``report.md``, ``report.html``
    (the same blocks, figures embedded) and ``results.csv``."""
    doc, out = query.read(results), Path(out)
    images = report_figures(doc, out)
    blocks = document(doc)
    atomic_write(out / "report.md", markdown(blocks))
    atomic_write(out / "report.html", html(blocks, images))
    atomic_write(out / "results.csv", csv_text(query.evaluation_table(doc), CSV_FIELDS))
