"""What every resolution document is made of: its header (:func:`header`: the report's name and version,
then what it measured) and its JSON (:func:`to_json`: the document without its tensors)."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from ...core.version import header as report_header

#: Version of the JSON document written by :func:`.analytic.analytic`, :func:`.empirical.empirical_run` and the CLI.
REPORT, REPORT_VERSION = "lexkit.resolution", 3  # the report's header (lexkit.core.version.header)


def header(source: str, **named: Any) -> dict:
    """The first keys of every resolution document: the report's header, the ``source`` (analytic,
    empirical, model) and what it measured (``named``: a ``scheme`` spec, or a model's ``label`` and the
    rest of :func:`lexkit.instruments.identity`)."""
    return {**report_header(REPORT, REPORT_VERSION), "source": source, **named}


def to_json(doc: dict) -> dict:
    """A copy of a document (or result row) without its tensors (``curve``, ``count``)."""
    if isinstance(doc, dict):
        return {k: to_json(v) for k, v in doc.items() if not isinstance(v, Tensor)}
    if isinstance(doc, list):
        return [to_json(v) for v in doc]
    return doc
