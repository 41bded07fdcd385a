"""The study report's grid figures (bpb by length, the analytic s[n], R per layer, entropy, loss by
position), drawn from the typed results.json through :mod:`lexkit.study.results` with the helpers of
:mod:`lexkit.documents.plots`; :func:`draw` draws any table's figures the same way."""

from __future__ import annotations

import io
from pathlib import Path

from ...documents import plots
from ...training.runs import atomic_write
from .. import results as query
from ..schema import StudyResults


def bpb_by_length(doc: StudyResults, path: str | Path) -> None:
    """bpb against evaluation length, one panel per pattern, one line per row of the grid."""
    fig, axes = plots.figure(5 * len(doc.patterns), 4, panels=len(doc.patterns))
    for ax, pattern in zip(axes, doc.patterns):
        plots.series(ax)
        for label in query.labels(doc):
            plots.line(ax, query.curve(doc, label, pattern), label=label)
        plots.bpb_axes(ax, doc.train_len, pattern, "evaluation length (bytes)")
    plots.legend(fig, *axes)
    plots.save(fig, path)


def analytic_curves(doc: StudyResults, path: str | Path) -> None:
    """The analytic s[n] - s[0] (mean over heads, causal) the study computed before training; no
    file for a study that stored none (results.json of schema 1)."""
    if doc.analytic_curves is None:
        return
    fig, (ax,) = plots.figure(8, 4)
    plots.series(ax)
    for scheme, curve in doc.analytic_curves.curves.items():
        ax.plot(range(len(curve)), curve, label=scheme, lw=1, markevery=max(1, len(curve) // 12))
    plots.mark_length(ax, doc.train_len)
    ax.set_xlabel("distance n")
    ax.set_ylabel("s[n] − s[0] (analytic, mean over heads)")
    plots.legend(fig, ax)
    plots.save(fig, path)


def resolution_per_layer(doc: StudyResults, path: str | Path) -> None:
    """Empirical R per layer under causal attention, each row of the grid at its longest measured length."""
    fig, (ax,) = plots.figure(8, 4)
    plots.series(ax)
    for label in query.labels(doc):
        measured = query.resolution_per_layer(doc, label)
        if measured is not None:
            length, layers = measured
            ax.plot(range(len(layers)), layers, label=f"{label} @ {length}")
    ax.set_xlabel("layer")
    ax.set_ylabel("empirical R (mean over heads)")
    plots.legend(fig, ax)
    plots.save(fig, path)


def entropy_by_length(doc: StudyResults, path: str | Path) -> None:
    """Attention entropy against length, under causal and under the last pattern (one series each)."""
    patterns = doc.patterns
    fig, (ax,) = plots.figure(9, 4.5)
    plots.series(ax)
    for label in query.labels(doc):
        for pattern in dict.fromkeys(("causal", patterns[-1])):  # once each, in order
            pts = query.entropy(doc, label, pattern)
            if pts:
                plots.line(ax, pts, label=f"{label} {pattern}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("length")
    ax.set_ylabel("attention entropy (nats, mean over layers)")
    plots.legend(fig, ax, fontsize=6)
    plots.save(fig, path)


def loss_by_position(doc: StudyResults, path: str | Path) -> None:
    """bpb by position within the chunk at the longest length, one panel per pattern."""
    longest = max(doc.lengths)
    fig, axes = plots.figure(5 * len(doc.patterns), 4, panels=len(doc.patterns))
    for ax, pattern in zip(axes, doc.patterns):
        plots.series(ax)
        for label in query.labels(doc):
            pts = query.seed_mean(((r.from_ + r.to) / 2, r.bpb) for r in query.by_position(doc, label, pattern,
                                                                                           longest))
            if pts:
                plots.line(ax, pts, label=label)
        plots.bpb_axes(ax, doc.train_len, f"{pattern} at {longest}", "position in the chunk")
    plots.legend(fig, *axes)
    plots.save(fig, path)


#: The figures of the study report's grid: file name -> drawing function (the report links these
#: names; each takes the results and a path or binary stream, and draws nothing when it has nothing
#: to draw). Each table beside the grid has its own (:attr:`lexkit.study.plan.StudyTable.figures`).
GRID_FIGURES = {
    "bpb_by_length.png": bpb_by_length,
    "s_curves.png": analytic_curves,
    "resolution_per_layer.png": resolution_per_layer,
    "entropy.png": entropy_by_length,
    "loss_by_position.png": loss_by_position,
}


def draw(figures: dict, results: StudyResults | dict, out: str | Path | None = None) -> dict[str, bytes]:
    """Draw ``figures`` (file name -> drawing function) once each: name -> PNG bytes (a figure with
    nothing to draw is absent), also written into the directory ``out`` when given."""
    doc = query.read(results)
    images = {}
    for name, drawing in figures.items():
        buffer = io.BytesIO()
        drawing(doc, buffer)
        if buffer.getvalue():
            images[name] = buffer.getvalue()
            if out is not None:
                atomic_write(Path(out) / name, images[name])
    return images


# -- retrieval ------------------------------------------------------------------------------------
