"""The evaluation's figure (``lexkit eval --plot``), drawn from its report."""

from __future__ import annotations

from pathlib import Path

from ...documents.plots import figure, line, mark_length, save
from .rows import eval_rows, position_rows


def eval_report(report: dict, path: str | Path) -> None:
    """Left: bpb against length, one line per pattern. Right: bpb by position in the window at
    the longest length. ``report`` is :func:`lexkit.evaluate.evaluate`'s (a run's or an hf: model's)."""
    fig, (left, right) = figure(panels=2)
    longest = max(report["lengths"])
    results, buckets = eval_rows(report), position_rows(report)
    for pattern in report["patterns"]:
        line(left, [(r.length, r.bpb) for r in results if r.pattern == pattern and r.bpb is not None], marker="o",
              label=pattern)
        line(right, sorted(((b.from_ + b.to) / 2, b.bpb) for b in buckets
                            if b.pattern == pattern and b.length == longest), marker=".", label=pattern)
    for ax, label in ((left, "length"), (right, f"position in the window (length {longest})")):
        mark_length(ax, report.get("train_len"))
        ax.set_xscale("log", base=2)
        ax.set_xlabel(label)
        ax.set_ylabel("bits per byte")
        ax.legend(fontsize="small")
    fig.suptitle(f"{report.get('run', '')}: {report.get('label', '')}")
    save(fig, path)
