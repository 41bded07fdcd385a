"""The needle mass's figure (``lexkit inspect TARGET --needle-mass --plot``), drawn from its report."""

from __future__ import annotations

from pathlib import Path

from ....documents.plots import COLORS, mark_length, save
from .measure import report_rows


def needle_mass(report: dict, path: str | Path) -> None:
    """The needle mass (``lexkit inspect TARGET --needle-mass``'s JSON document), one row of panels
    per pattern: left, the attention mass on the needle against length per layer (the best head
    solid, the head mean dashed) and the mass of uniform attention (dotted); right, the entropy
    (head mean) against length per layer and ln(keys) (dotted). A report of any version (its rows
    read by :func:`.measure.report_rows`)."""
    from matplotlib.figure import Figure

    patterns = report["patterns"]
    fig = Figure(figsize=(11.0, 4.2 * len(patterns)), layout="constrained")
    grid = fig.subplots(len(patterns), 2, squeeze=False)
    every = report_rows(report)
    for (mass, ent), pattern in zip(grid, patterns):
        rows = [r for r in every if r.pattern == pattern]
        layers = sorted({(r.layer, r.scope) for r in rows})
        for i, (layer, scope) in enumerate(layers):
            pts = sorted((r.length, r.mass_max, r.mass, r.entropy) for r in rows if r.layer == layer)
            color = COLORS[i % len(COLORS)]
            label = f"L{layer} {scope}"
            mass.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=color, label=f"{label}, best head")
            mass.plot([p[0] for p in pts], [p[2] for p in pts], marker=".", linestyle="--", color=color,
                      label=f"{label}, head mean")
            ent.plot([p[0] for p in pts], [p[3] for p in pts], marker="o", color=color, label=label)
        first = [r for r in rows if r.layer == layers[0][0]] if layers else []
        ref = sorted((r.length, r.uniform, r.uniform_entropy) for r in first)
        mass.plot([p[0] for p in ref], [p[1] for p in ref], linestyle=":", color="black", label="uniform attention")
        ent.plot([p[0] for p in ref], [p[2] for p in ref], linestyle=":", color="black", label="ln(keys): uniform")
        for ax, ylabel in ((mass, "attention mass on the needle"), (ent, "attention entropy (nats)")):
            mark_length(ax, report.get("train_len"))
            ax.set_xscale("log", base=2)
            ax.set_xlabel(f"length ({report.get('unit', 'bytes')})")
            ax.set_ylabel(ylabel)
            ax.set_title(pattern)
            ax.legend(fontsize="x-small")
        if rows and all(getattr(r, k) > 0 for r in rows for k in ("mass", "mass_max", "uniform")):
            mass.set_yscale("log")  # masses span decades as the haystack grows
    fig.suptitle(f"{report.get('target', '')}: {report.get('task', '')}"
                 + (f" ({report['format']})" if report.get("format") else "") + f", {report.get('scheme', '')}")
    save(fig, path)
