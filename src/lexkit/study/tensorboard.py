"""A study's evaluations as TensorBoard shows them (``lexkit study --tensorboard DIR``): each row of the
grid and each configuration of a table beside it a subdirectory of scalars over the evaluation length,
written with :mod:`lexkit.training.tensorboard`'s writer."""

from __future__ import annotations

import math
from pathlib import Path

from ..training.tensorboard import export_writer, require, slug, tag_slug
from . import results as query
from .schema import TABLES, StudyResults


def study_scalars(results: StudyResults | dict) -> dict[str, dict[str, dict[int, float]]]:
    """A study's evaluations as TensorBoard would show them: subdirectory -> tag -> {length:
    value}. One subdirectory per row of the grid (``eval/<label>``) and per configuration of each
    table beside it (``<table>/<configuration>``: ``extension/<label>``, :meth:`Table.scalars
    <lexkit.study.plan.StudyTable.scalars>`), tags ``bpb/<pattern>`` (and ``ppl/<pattern>``, causal and
    beyond), means over seeds as in the report's tables; a cell with no value is left out."""
    doc = query.read(results)
    out: dict[str, dict[str, dict[int, float]]] = {}
    for label in query.labels(doc):
        tags = out.setdefault(f"eval/{slug(label)}", {})
        for pattern in doc.patterns:
            for key in ("bpb", "ppl"):
                points = query.curve(doc, label, pattern, key)
                if points:
                    tags[f"{key}/{tag_slug(pattern)}"] = points
    for table in TABLES:
        for name, series in table.scalars(doc).items():
            for (quantity, pattern), points in series.items():
                out.setdefault(f"{table.key}/{slug(name)}", {})[f"{quantity}/{tag_slug(pattern)}"] = points
    return out


def write_study(results: StudyResults | dict, logdir: str | Path) -> list[str]:
    """:func:`study_scalars` as event files under ``logdir`` (the ``step`` axis is the
    evaluation length in bytes; non-finite values left out); returns the subdirectories."""
    require()
    written = []
    for name, tags in study_scalars(results).items():
        with export_writer(Path(logdir) / name) as writer:
            for tag_name, points in tags.items():
                for length, value in sorted(points.items()):
                    if math.isfinite(value):
                        writer.scalar(tag_name, value, length)
        written.append(name)
    return written
