"""The instruments' figures (resolution's two, an evaluation report's, retrieval's, the byte table's
and the needle mass's) and the helpers every figure shares, the study report's among them (its grid's
five: :mod:`lexkit.study.report.figures`; each table beside the grid draws its own with them,
:mod:`lexkit.study.tables`).

matplotlib's object API only (``matplotlib.figure.Figure``, no pyplot): no global backend or
figure state, so plotting is safe in a library, a test run or a thread, and needs no display.
Figures are drawn from plain data (a study's ``results.json``, a resolution document), never
from a model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

import torch
from torch import Tensor

from .rows import RetrievalCell, RetrievalSummary, eval_rows, position_rows

DPI = 110
BPB_TOP = 8.5  # bpb axes stop here: a diverging scheme would squash every other line


def figure(width: float = 11.0, height: float = 4.2, panels: int = 1):
    """A constrained-layout figure and its ``panels`` axes side by side."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, panels, squeeze=False)[0]
    return fig, list(axes)


def save(fig, path: str | Path | BinaryIO) -> None:
    """Into a file (PNG, SVG, PDF, ...: the file type from its name) or a binary stream (PNG)."""
    if isinstance(path, (str, Path)):
        fig.savefig(str(path), dpi=DPI)
    else:
        fig.savefig(path, dpi=DPI, format="png")


def finite(x: Tensor) -> Tensor:
    """float64 copy with every non-finite entry (a never-visible distance) as NaN (a gap)."""
    x = x.to(torch.float64).clone()
    x[~torch.isfinite(x)] = math.nan
    return x


def mark_length(ax, train_len: int | None) -> None:
    if train_len:
        ax.axvline(train_len, color="grey", linestyle=":", linewidth=1)


def bpb_axes(ax, train_len: int | None, title: str, xlabel: str) -> None:
    """Bits per byte against a log2 x axis, the training length marked, the top capped."""
    mark_length(ax, train_len)
    ax.set_xscale("log", base=2)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("bits per byte")
    ax.set_ylim(top=min(BPB_TOP, ax.get_ylim()[1]))


def line(ax, points: dict | list, *style, **options) -> None:
    """One line through ``points`` (x -> y, or (x, y) pairs)."""
    pts = list(points.items()) if isinstance(points, dict) else list(points)
    ax.plot([p[0] for p in pts], [p[1] for p in pts], *style, **options)


#: a figure's series differ in colour (10), line style (a new one every 10 series) and marker (7,
#: drawn hollow): two series that coincide (window and bca past the training length) still show
#: both markers, and no two of the first 40 series look alike
_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:gray",
           "tab:olive", "tab:cyan")
_LINESTYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "v", "D", "P", "X")


def series(ax) -> None:
    """Give the series drawn next on ``ax`` the styles above, in order (call before plotting)."""
    from cycler import cycler

    n = len(_COLORS) * len(_LINESTYLES)
    ax.set_prop_cycle(cycler(color=[_COLORS[i % len(_COLORS)] for i in range(n)],
                             linestyle=[_LINESTYLES[i // len(_COLORS)] for i in range(n)],
                             marker=[_MARKERS[i % len(_MARKERS)] for i in range(n)]))


def legend(fig, *axes, fontsize: float = 7) -> None:
    """One legend for the figure (the series of its first axes: every panel draws the same ones),
    outside the axes on the right (a legend inside covered the curves it names once a study had
    nine schemes); markers hollow, so a marker under another shows."""
    for ax in axes:
        for drawn in ax.get_lines():
            drawn.set_markerfacecolor("none")
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside right upper", fontsize=fontsize)


# -- one evaluation report (lexkit eval --plot) -------------------------------------------------
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
    fig.suptitle(f"{report.get('run', '')}: {report.get('scheme', '')}")
    save(fig, path)


def text_box(annotation, renderer):
    """The display box of an annotation's text alone (its line to the point left out)."""
    from matplotlib.text import Text

    annotation.update_positions(renderer)
    return Text.get_window_extent(annotation, renderer)


#: where a label may go around its point, in typographic points: (dx, dy, horizontal, vertical
#: alignment), tried on rings of growing radius, nearest first
_SIDES = ((1, 0, "left", "center"), (1, 1, "left", "bottom"), (1, -1, "left", "top"), (0, 1, "center", "bottom"),
          (0, -1, "center", "top"), (-1, 0, "right", "center"), (-1, 1, "right", "bottom"),
          (-1, -1, "right", "top"))


def place_labels(ax, points: Sequence[tuple[float, float]], labels: Sequence[str], *, fontsize: float = 6,
                 rings: int = 40) -> list:
    """Annotate each point with its label so that no two labels' boxes meet, deterministically:
    the figure's layout is settled and then frozen (labels placed later cannot move the axes),
    and each label (points from the top, then from the left) takes the first position around its
    point, on rings of growing radius, whose box meets no label placed before and stays inside
    the axes; one away from its point gets a thin line to it. Returns the annotations."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = ax.figure
    fig.draw_without_rendering()  # the constrained layout, settled ...
    fig.set_layout_engine("none")  # ... and kept, so the boxes measured here are the ones saved
    renderer = FigureCanvasAgg(fig).get_renderer()  # text extents as the PNG will have them
    frame = ax.get_window_extent(renderer)
    placed, out = [], []
    for i in sorted(range(len(points)), key=lambda i: (-points[i][1], points[i][0], i)):
        text = None
        for ring in range(rings):
            radius = 4 + 7 * ring
            for dx, dy, ha, va in _SIDES:
                text = ax.annotate(labels[i], points[i], xytext=(dx * radius, dy * radius), textcoords="offset points",
                                   fontsize=fontsize, ha=ha, va=va,
                                   arrowprops=dict(arrowstyle="-", lw=0.4, color="grey") if ring else None)
                box = text_box(text, renderer).expanded(1.05, 1.15)
                if frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1) and \
                        not any(box.overlaps(other) for other in placed):
                    break
                text.remove()
                text = None
            if text is not None:
                break
        if text is None:  # nowhere free within the rings: beside the point, as before
            text = ax.annotate(labels[i], points[i], xytext=(3, 3), textcoords="offset points", fontsize=fontsize)
            box = text_box(text, renderer)
        placed.append(box)
        out.append(text)
    return out


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
    fig.suptitle(f"{report.get('target', '')}: {report.get('task', '')} ({report.get('scheme', '')})")
    save(fig, path)


# -- lexkit inspect -------------------------------------------------------------------------------
def embedding(report: dict, path: str | Path) -> None:
    """The byte table (``lexkit inspect RUN``'s JSON document): left, each token's cosine to the mean
    row of the unseen ones against how often training showed it (count + 1, log axis; unseen at 1),
    the most collapsed seen tokens and the three rarest labelled; right, its row norm. An untied head's output rows are
    drawn beside the input rows."""
    rows = report["rows"]
    key = "trained" if "trained" in rows[0] else "corpus"
    untied = "out_cosine" in rows[0]
    fig, (left, right) = figure(panels=2)
    by_corpus = report["summary"].get("unseen_by") == "corpus"
    for prefix, what, marker in (("", "input rows" if untied else "rows", "o"), ("out_", "output rows", "s")):
        if prefix and not untied:
            continue
        for seen, color in ((True, "tab:blue" if not prefix else "tab:orange"), (False, "tab:gray")):
            part = [r for r in rows if r["seen"] == seen]
            xs = [r[key] + 1 for r in part]
            label = f"{what}, " + (("in the corpus" if seen else "not in the corpus") if by_corpus
                                   else ("seen" if seen else "never shown"))
            if part and part[0][f"{prefix}cosine"] is not None:
                left.scatter(xs, [r[f"{prefix}cosine"] for r in part], s=10, marker=marker, facecolors="none",
                             edgecolors=color, linewidths=0.7, label=label)
            right.scatter(xs, [r[f"{prefix}norm"] for r in part], s=10, marker=marker, facecolors="none",
                          edgecolors=color, linewidths=0.7, label=label)
    unseen = "corpus-absent" if by_corpus else "never-shown"
    for ax, ylabel in ((left, f"cosine to the mean row of the {unseen} tokens"), (right, "row norm")):
        ax.set_xscale("log")
        ax.set_xlabel(f"{'times training showed it' if key == 'trained' else 'count in the corpus'} + 1")
        ax.set_ylabel(ylabel)
        if ax.collections:
            ax.legend(fontsize="small")
    if not left.collections:
        left.text(0.5, 0.5, f"no {unseen} token: no mean to compare with", transform=left.transAxes, ha="center")
    fig.suptitle(f"{report.get('run', '')}: {report.get('scheme', '')}, head {'tied' if report['tied'] else 'untied'}")
    summary = report["summary"]
    marked = {c["token"]: c for c in summary.get("collapsed", []) + summary.get("rarest", [])[:3]}  # and the rarest
    cosine = {r["token"]: r["cosine"] for r in rows}
    points = [(c[key] + 1, cosine[t]) for t, c in marked.items() if cosine[t] is not None]
    if points:  # after the title: placing labels freezes the layout
        place_labels(left, points, [c["label"] for t, c in marked.items() if cosine[t] is not None])
    save(fig, path)


def needle_mass(report: dict, path: str | Path) -> None:
    """The needle mass (``lexkit inspect TARGET --needle-mass``'s JSON document), one row of panels
    per pattern: left, the attention mass on the needle against length per layer (the best head
    solid, the head mean dashed) and the mass of uniform attention (dotted); right, the entropy
    (head mean) against length per layer and ln(keys) (dotted)."""
    from matplotlib.figure import Figure

    patterns = report["patterns"]
    fig = Figure(figsize=(11.0, 4.2 * len(patterns)), layout="constrained")
    grid = fig.subplots(len(patterns), 2, squeeze=False)
    for (mass, ent), pattern in zip(grid, patterns):
        rows = [r for r in report["rows"] if r["pattern"] == pattern]
        layers = sorted({(r["layer"], r["kind"]) for r in rows})
        for i, (layer, kind) in enumerate(layers):
            pts = sorted((r["length"], r["mass_max"], r["mass"], r["entropy"]) for r in rows if r["layer"] == layer)
            color = _COLORS[i % len(_COLORS)]
            label = f"L{layer} {kind}"
            mass.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=color, label=f"{label}, best head")
            mass.plot([p[0] for p in pts], [p[2] for p in pts], marker=".", linestyle="--", color=color,
                      label=f"{label}, head mean")
            ent.plot([p[0] for p in pts], [p[3] for p in pts], marker="o", color=color, label=label)
        first = [r for r in rows if r["layer"] == layers[0][0]] if layers else []
        ref = sorted((r["length"], r["uniform"], r["uniform_entropy"]) for r in first)
        mass.plot([p[0] for p in ref], [p[1] for p in ref], linestyle=":", color="black", label="uniform attention")
        ent.plot([p[0] for p in ref], [p[2] for p in ref], linestyle=":", color="black", label="ln(keys): uniform")
        for ax, ylabel in ((mass, "attention mass on the needle"), (ent, "attention entropy (nats)")):
            mark_length(ax, report.get("train_len"))
            ax.set_xscale("log", base=2)
            ax.set_xlabel(f"length ({report.get('unit', 'bytes')})")
            ax.set_ylabel(ylabel)
            ax.set_title(pattern)
            ax.legend(fontsize="x-small")
        if rows and all(r[k] > 0 for r in rows for k in ("mass", "mass_max", "uniform")):
            mass.set_yscale("log")  # masses span decades as the haystack grows
    fig.suptitle(f"{report.get('target', '')}: {report.get('task', '')}"
                 + (f" ({report['format']})" if report.get("format") else "") + f", {report.get('scheme', '')}")
    save(fig, path)
