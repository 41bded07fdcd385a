"""The instruments, on a floor of their own, behind one seam (:mod:`.base`: an ``Instrument`` is its
``Options``, ``measure``, ``text``, ``csv`` and ``figures``; ``register`` makes a new one ``lexkit NAME``):
one folder each, its measure (``measure.py``: what it computes
from a subject, a model or a scheme, as JSON-ready documents), its report (``report.py``: the terminal text
and the JSON documents, every number written there and nowhere in the command) and its figures
(``figures.py``). A command (``lexkit/cli/``) parses, calls them and writes what they return. The public
names stay where users import them: ``lexkit.resolution`` is the resolution instrument's measure, callable.

Every report opens with the same header (:func:`lexkit.core.version.header`). The instruments: ``evaluate``
(with ``paired``), ``retrieval``, ``resolution``, ``inspect/bytes`` and ``inspect/needle_mass`` (``lexkit
inspect``'s two), ``principles`` (table A's); each keeps its typed rows beside its measure (``rows.py``).
:mod:`.subject` is the seam below them all: what ``lexkit.load`` returns (a run or an hf: model)."""

from __future__ import annotations

from ..documents.render import csv_text

#: the keys of a subject's header (:meth:`lexkit.instruments.subject.RunSubject.describe`) that say what ran, which a
#: report copies as they are: ``label`` always; ``scheme`` (and ``trained_scheme``) where one scheme ran on
#: every layer; ``layout`` (and ``trained_layout``, an hf: model's ``selectors``) where the layers differ
IDENTITY = ("label", "scheme", "trained_scheme", "layout", "trained_layout", "selectors")


def identity(info: dict) -> dict:
    """The :data:`IDENTITY` keys ``info`` has, in that order."""
    return {key: info[key] for key in IDENTITY if key in info}


def named(report: dict) -> str:
    """How a report's header line names what ran: ``scheme rope`` (with ``(trained as ...)`` when an
    evaluation changed it), ``layout hwfa:W=16`` (``(trained as ...)`` likewise), or an hf: model's label."""
    if "scheme" in report:
        trained = report.get("trained_scheme")
        return f"scheme {report['scheme']}" + (f" (trained as {trained})" if trained else "")
    if "layout" in report and "selectors" not in report:  # a lexkit run's layout (an hf: model's has selectors)
        trained = report.get("trained_layout")
        return f"layout {report['label']}" + (f" (trained as {trained})" if trained else "")
    return report["label"]


def layout_lines(info: dict) -> list[str]:
    """The header line of a Hugging Face model whose layers differ (every instrument's table): its
    layout and the selectors ``--pattern NAME=SPEC`` takes; none for any other model."""
    if not info.get("layout") or not info.get("selectors"):
        return []
    return [f"layout {info['layout']}  (selectors: {', '.join(info['selectors'])}, L<i>, L<i>-<j>)"]


def report_csv(report: dict) -> str:
    """A report's ``rows`` as CSV: every field but those holding lists (per-head values: the JSON
    has them), in the order the rows first give them; a field a row lacks is empty."""
    rows = report["rows"]
    lists = {k for r in rows for k, v in r.items() if isinstance(v, list)}
    fields = [k for k in dict.fromkeys(k for r in rows for k in r) if k not in lists]
    return csv_text([{k: r.get(k) for k in fields} for r in rows], fields)
