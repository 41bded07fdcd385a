"""Table G's figures: bpb at 16x against exact match at 16x (a scatter coloured by the goal), and
exact match by configuration and length (a heatmap), drawn with the helpers of :mod:`lexkit.documents.plots`."""

from __future__ import annotations

import math
from pathlib import Path

from ....documents import plots
from ...schema import StudyResults
from . import queries
from .rows import FINE_TUNE, METHOD, TRAINED, section


def retrieval_scatter(results: StudyResults, path: str | Path) -> None:
    """Table G on both axes: bpb at 16x (x) against exact match at 16x over all depths (y), one
    point per configuration (scheme or method, and pattern), labelled and coloured by the goal:
    green meets it, blue is flat in bpb (within 3 % of its own 1x) but does not retrieve at
    every depth, red is not flat; the 90 % line drawn. Points at 0 % are labelled only when they
    have the lowest bpb (the heatmap names every configuration). No label covers another, also
    where points coincide (:func:`lexkit.documents.plots.place_labels`). No file without table G."""
    goal = queries.context_goal(results)
    if goal is None:
        return
    far = goal.multiple
    fig, (ax,) = plots.figure(9, 5.5)
    markers = {TRAINED: "o", METHOD: "s", FINE_TUNE: "^"}
    points = [(r, r.line.bpb.get(far), r.line.accuracy.get(far)) for r in goal.scored]
    points = [(r, x, y) for r, x, y in points if x is not None and y is not None]
    lowest = min((x for _, x, _ in points), default=None)
    for r, x, y in points:
        ax.scatter([x], [y], marker=markers.get(r.line.origin, "o"), s=36, color="tab:green" if r.met else
                   ("tab:blue" if r.flat else "tab:red"), alpha=0.8)
    ax.axhline(queries.RETRIEVES, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel(f"bits per byte at {far}x the training length")
    ax.set_ylabel(f"exact match at {far}x (all depths)")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title("perplexity against use of context (green: goal met; blue: bpb flat within 3 % of 1x; "
                 "red: not flat; circle as trained, square method, triangle fine-tune)", fontsize=8)
    named = [(x, y, f"{r.line.label} [{r.line.pattern}]") for r, x, y in points if y > 0 or x == lowest]
    plots.place_labels(ax, [(x, y) for x, y, _ in named], [label for _, _, label in named])
    plots.save(fig, path)


def retrieval_heatmap(doc: StudyResults, path: str | Path) -> None:
    """Exact match over all depths, configuration (rows) by multiple of the training length
    (columns), each cell annotated in percent. No file without table G."""
    rows = queries.retrieval_lines(doc, None)  # trained and held-out formats, each configuration's together
    if not rows:
        return
    multiples = section(doc).multiples
    grid = [[r.accuracy.get(m, math.nan) for m in multiples] for r in rows]
    fig, (ax,) = plots.figure(6.5, 1.2 + 0.24 * len(rows))
    image = ax.imshow(grid, vmin=0.0, vmax=1.0, cmap="RdYlGn", aspect="auto")
    for i, line in enumerate(grid):
        for j, v in enumerate(line):
            if not math.isnan(v):
                ax.text(j, i, f"{100 * v:.0f}", ha="center", va="center", fontsize=6)
    ax.set_xticks(range(len(multiples)), [f"{m}x" for m in multiples], fontsize=7)
    ax.set_yticks(range(len(rows)), [f"{r.label} [{r.pattern}] {r.group}" for r in rows], fontsize=6)
    ax.set_xlabel("length (multiple of the training length)")
    fig.colorbar(image, ax=ax, label="exact match", shrink=0.8)
    plots.save(fig, path)


#: table G's figures in the report: file name -> drawing function
FIGURES = {"retrieval_scatter.png": retrieval_scatter, "retrieval_heatmap.png": retrieval_heatmap}
