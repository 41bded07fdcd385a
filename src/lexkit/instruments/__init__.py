"""The instruments, on a floor of their own, behind one seam (:mod:`.base`: an ``Instrument`` is its
``Options``, its ``Report``, ``measure``, ``text``, ``csv`` and ``figures``; ``register`` makes a new one
``lexkit NAME``): one folder each, its measure (``measure.py``: what it computes from a subject, a model or a
scheme, as a typed report, :mod:`lexkit.documents.report`), its report (``report.py``: the terminal text
and the JSON documents, every number written there and nowhere in the command) and its figures
(``figures.py``). A command (``lexkit/cli/``) parses, calls them and writes what they return. The public
names stay where users import them: ``lexkit.resolution`` is the resolution instrument's measure, callable.

Every report opens with the same header (:func:`lexkit.core.version.header`). The instruments: ``evaluate``
(with ``paired``), ``retrieval``, ``resolution``, ``inspect/bytes`` and ``inspect/needle_mass`` (``lexkit
inspect``'s two), ``principles`` (table A's); each keeps its typed rows and its report's class beside its
measure (``rows.py``), the keys that say what ran on :class:`IdentityReport`.
:mod:`.subject` is the seam below them all: what ``lexkit.load`` returns (a run or an hf: model)."""

from __future__ import annotations

import dataclasses

from ..documents.render import csv_text
from ..documents.report import Report, key


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class IdentityReport(Report):
    """A report of something that ran, named by the keys of its subject's header that say what ran
    (:meth:`lexkit.instruments.subject.RunSubject.describe`), copied as they are (:data:`IDENTITY`)."""

    label: str | None = key("what the report calls what ran: a scheme spec, a layout as typed, an hf: model's "
                            "description (always, but in analytic R of scheme specs)", optional=True)
    scheme: str | None = key("the scheme that ran on every layer, its resolved spec", optional=True)
    trained_scheme: str | None = key("the run's own scheme, where an evaluation's --scheme changed it", optional=True)
    layout: str | None = key("every layer as it ran, where the layers differ", optional=True)
    trained_layout: str | None = key("the run's own layout, where an evaluation's --scheme changed it", optional=True)
    selectors: list[str] | None = key("an hf: model's layer selectors, the names --pattern NAME=SPEC takes",
                                      optional=True)


#: the keys of a subject's header that say what ran, which a report copies as they are (:class:`IdentityReport`):
#: ``label`` always; ``scheme`` (and ``trained_scheme``) where one scheme ran on every layer; ``layout`` (and
#: ``trained_layout``, an hf: model's ``selectors``) where the layers differ
IDENTITY = tuple(name for name in IdentityReport.key_names() if name not in Report.key_names())


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
