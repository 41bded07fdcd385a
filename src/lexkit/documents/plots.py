"""The helpers every figure shares: a figure and its saving, the bpb axes, lines, series, legends and
labels that do not overlap. Each instrument draws its own figures with them (``figures.py`` in each folder
of :mod:`lexkit.instruments`), as do the study report's grid (:mod:`lexkit.study.report.figures`) and
each table beside it (:mod:`lexkit.study.tables`).

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
COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:gray",
          "tab:olive", "tab:cyan")
_LINESTYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "v", "D", "P", "X")


def series(ax) -> None:
    """Give the series drawn next on ``ax`` the styles above, in order (call before plotting)."""
    from cycler import cycler

    n = len(COLORS) * len(_LINESTYLES)
    ax.set_prop_cycle(cycler(color=[COLORS[i % len(COLORS)] for i in range(n)],
                             linestyle=[_LINESTYLES[i // len(COLORS)] for i in range(n)],
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
