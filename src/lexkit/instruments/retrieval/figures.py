"""Retrieval's figure (``lexkit retrieval --plot``), drawn from its report."""

from __future__ import annotations

import math
from pathlib import Path

from ...documents.plots import figure, mark_length, save
from .rows import RetrievalCell, RetrievalSummary


def retrieval(report: dict, path: str | Path) -> None:
    """The needle-in-a-haystack heatmaps (exact match, depth x length; one panel per pattern),
    then accuracy against length over all depths, one line per pattern with its 95 % interval.
    ``report`` is ``lexkit retrieval``'s JSON document."""
    patterns, lengths, depths = report["patterns"], report["lengths"], report["depths"]
    cell = {(r.pattern, r.length, r.depth): r.accuracy for r in map(RetrievalCell.from_json, report["rows"])}
    summary = [RetrievalSummary.from_json(s) for s in report["summary"]]
    fig, axes = figure(4.2 * (len(patterns) + 1), 4.2, panels=len(patterns) + 1)
    image = None
    for ax, pattern in zip(axes, patterns):
        grid = [[cell.get((pattern, n, d), math.nan) for n in lengths] for d in depths]
        image = ax.imshow(grid, vmin=0.0, vmax=1.0, cmap="RdYlGn", aspect="auto", origin="upper")
        ax.set_xticks(range(len(lengths)), [str(n) for n in lengths], rotation=45, fontsize=7)
        ax.set_yticks(range(len(depths)), [f"{d:g}%" for d in depths], fontsize=7)
        ax.set_xlabel("length (bytes)")
        ax.set_ylabel("needle depth")
        ax.set_title(pattern)
    if image is not None:
        fig.colorbar(image, ax=axes[: len(patterns)], label="exact match", shrink=0.8)
    lines = axes[-1]
    for pattern in patterns:
        pts = sorted((s.length, s.accuracy, s.low, s.high) for s in summary if s.pattern == pattern)
        xs = [p[0] for p in pts]
        lines.plot(xs, [p[1] for p in pts], marker="o", label=pattern)
        lines.fill_between(xs, [p[2] for p in pts], [p[3] for p in pts], alpha=0.15)
    mark_length(lines, report.get("train_len"))
    lines.set_xscale("log", base=2)
    lines.set_ylim(-0.02, 1.02)
    lines.set_xlabel("length (bytes)")
    lines.set_ylabel("exact match (all depths)")
    lines.legend(fontsize="small")
    fig.suptitle(f"{report.get('target', '')}: {report.get('task', '')} ({report.get('label', '')})")
    save(fig, path)
