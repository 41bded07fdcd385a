"""Table E's figure: bpb against length for every context-extension configuration, beside the
grid's rope and xpos (the drawing helpers of :mod:`lexkit.documents.plots`)."""

from __future__ import annotations

from pathlib import Path

from ....documents import plots
from ... import results as query
from ...schema import StudyResults
from .queries import extension_lines


def extension(doc: StudyResults, path: str | Path) -> None:
    """bpb against length for every context-extension configuration (fine-tuned ones labelled so),
    with the main grid's rope and xpos under their patterns; no file when the study ran
    no context extension."""
    lines = extension_lines(doc)
    if not lines:
        return
    fig, (ax,) = plots.figure(11, 5.5)
    plots.series(ax)
    for line in lines:
        label = line.label + ("" if line.pattern == "causal" else f" [{line.pattern}]") + (
            " (fine-tuned)" if line.finetune else "")
        plots.line(ax, {n: mean for n, (mean, _) in line.bpb.items() if mean is not None}, label=label, lw=1)
    for row in ("rope", "xpos"):
        if row not in query.labels(doc):
            continue
        for pattern in doc.patterns[1:]:
            plots.line(ax, query.curve(doc, row, pattern), label=f"{row} [{pattern}]", lw=1)
    plots.bpb_axes(ax, doc.train_len, "", "evaluation length (bytes)")
    plots.legend(fig, ax, fontsize=6)
    plots.save(fig, path)


#: table E's figures in the report: file name -> drawing function
FIGURES = {"extension.png": extension}
