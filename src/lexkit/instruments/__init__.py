"""The instruments, on a floor of their own: one folder each, its measure (``measure.py``: what it computes
from a subject, a model or a scheme, as JSON-ready documents), its report (``report.py``: the terminal text
and the JSON documents, every number written there and nowhere in the command) and its figures
(``figures.py``). A command (``lexkit/cli/``) parses, calls them and writes what they return. The public
names stay where users import them: ``lexkit.resolution`` is the resolution instrument's measure, callable.

Every report opens with the same header (:func:`lexkit.version.header`). Migrated so far: ``resolution``;
``evaluate``, ``retrieval``, ``inspect`` (the byte table, the needle mass) and ``principles`` keep their
modules at the top of the package until they move here the same way."""

from __future__ import annotations


def layout_lines(info: dict) -> list[str]:
    """The header line of a Hugging Face model whose layers differ (every instrument's table): its
    layout and the selectors ``--pattern NAME=SPEC`` takes; none for any other model."""
    if not info.get("layout") or not info.get("selectors"):
        return []
    return [f"layout {info['layout']}  (selectors: {', '.join(info['selectors'])}, L<i>, L<i>-<j>)"]
