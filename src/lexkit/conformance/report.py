"""The report of a run: implementation x case as a table of cells (``pass 3e-07``, ``FAIL 0.14``,
``n/a``, ``error``), the lines that say what each failure is, and the JSON document; what the command
prints (:func:`text`, :func:`listing`, :func:`matrix_text`) and the markdown of ``--out`` (:func:`blocks`,
:func:`matrix_blocks`, rendered by :mod:`lexkit.documents.render`). The model battery's cells and document:
:mod:`.models.report`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..core.version import header
from ..documents import render
from ..documents.blocks import Block, Bullets, Table, Text
from .cases import Case
from .harness import Result

#: the reports of ``lexkit conformance --json`` (a run; a ``--matrix``'s; ``--models``'): lexkit.core.version.header
REPORT, MATRIX_REPORT, REPORT_VERSION = "lexkit.conformance", "lexkit.conformance.matrix", 2
MODELS_REPORT = "lexkit.conformance.models"
MARK = {"pass": "pass", "fail": "FAIL", "n/a": "n/a", "error": "error"}


#: how a cell names the check its number is of
SHORT = {"inv_freq": "inv_freq", "attention_factor": "a", "tables": "tables", "rotate": "rotate", "scores": "scores"}


def cell(result: Result) -> str:
    """``pass 3.1e-07 tables`` / ``FAIL 0.14 inv_freq``: the status, the largest error of the check
    nearest its bound and that check (cells of one row may be of different checks: each says which)."""
    mark = MARK[result.status]
    if result.status in ("pass", "fail") and result.error is not None:
        check = SHORT.get(result.worst.check, result.worst.check)
        if not math.isfinite(result.error):
            return f"{mark} {'shape' if result.worst.where.startswith('shape') else 'non-finite'} {check}"
        return f"{mark} {result.error:.2g} {check}"
    return mark


def table(results: Sequence[Result], impls: Sequence[str], cases: Sequence[Case], write=cell) -> Table:
    """Cases down, implementations across (each cell by ``write``: a model case's is
    :func:`lexkit.conformance.models.report.cell`)."""
    by = {(r.impl, r.case): r for r in results}
    rows = [[c.name] + [write(by[(i, c.name)]) if (i, c.name) in by else "" for i in impls] for c in cases]
    return Table.of(["case", *impls], rows)


def matrix_table(by_version: dict[str, Sequence[Result]], cases: Sequence[Case], package: str,
                 write=cell) -> Table:
    """Cases down, releases of ``package`` across: when each difference came and went."""
    rows = []
    for c in cases:
        row = [c.name]
        for results in by_version.values():
            found = [r for r in results if r.case == c.name]
            row.append(write(found[0]) if found else "")
        rows.append(row)
    return Table.of(["case", *(f"{package} {v}" for v in by_version)], rows)


def notes(results: Sequence[Result]) -> list[str]:
    """One line per result that is not a pass or an n/a: implementation, case, what differs."""
    return [f"{r.impl} x {r.case}: {r.status}: {r.detail}" for r in results if r.status in ("fail", "error")]


def counts(results: Sequence[Result], impl: str) -> dict[str, int]:
    out = {k: 0 for k in MARK}
    for r in results:
        if r.impl == impl:
            out[r.status] += 1
    return out


def to_json(results: Sequence[Result], implementations: Sequence[dict], cases: Sequence[Case],
            skipped: Sequence[dict]) -> dict:
    """The whole run: versions, the cases (config, calls, checks, why), every result with its findings."""
    return {
        **header(REPORT, REPORT_VERSION),
        "implementations": list(implementations), "skipped": list(skipped),
        "cases": [{"name": c.name, "config": c.config.describe(), "why": c.why, "checks": list(c.checks),
                   "calls": [list(call) for call in c.calls], "refuse": c.refuse,
                   "twin": c.twin.describe() if c.twin is not None else None, "shift": c.shift, "within": c.within}
                  for c in cases],
        "results": [r.to_json() for r in results],
    }


# -- what an implementation says of itself ----------------------------------------------------------
def unavailable(adapter) -> str | None:
    """An adapter's ``unavailable()``: its reason, or the error it raised as one (no traceback)."""
    try:
        return adapter.unavailable()
    except Exception as exc:  # an adapter's runtime raises anything
        first = str(exc).strip().splitlines()
        return f"its unavailable() raised {type(exc).__name__}" + (f": {first[0]}" if first else "")


def version(adapter) -> str:
    """The adapter's ``version()``, or what it raised in its place."""
    try:
        return adapter.version()
    except Exception as exc:  # an adapter's runtime raises anything
        return f"(version() raised {type(exc).__name__})"


def implementations(adapters: Sequence) -> list[dict]:
    """The run's implementations, each with its version and what it exercises (the document's list)."""
    return [{"impl": a.name, "version": version(a), "exercises": a.summary} for a in adapters]


def _measured(impls: Sequence[dict]) -> str:
    return ", ".join(f"{i['impl']} {i['version']}".strip() for i in impls)


# -- a run: the terminal, the markdown of --out ---------------------------------------------------------
def text(results: Sequence[Result], impls: Sequence[dict], skipped: Sequence[dict], cases: Sequence,
         table: Table, *, what: str, models: bool = False) -> str:
    """What the command prints of a run: the cases and what they are checked against, the implementations
    (and those skipped, with why), the table, each difference, and every implementation's counts."""
    plural = "s" if len(cases) != 1 else ""
    lines = [f"conformance: {len(cases)} {'model ' if models else ''}case{plural} {what}",
             "implementations: " + (_measured(impls) or "none ran")]
    lines += [f"skipped: {s['impl']}: {s['reason']}" for s in skipped]
    if impls:
        lines += render.text_table(table)
        found = notes(results)
        if found:
            lines += ["", "differences:", *(f"  {line}" for line in found)]
        lines.append("")
        for i in impls:
            c = counts(results, i["impl"])
            lines.append(f"{i['impl']}: {c['pass']} pass, {c['fail']} fail, {c['error']} error, {c['n/a']} n/a")
    return "\n".join(lines)


def blocks(table: Table, found: Sequence[str], impls: Sequence[dict], skipped: Sequence[dict],
           date: str) -> list[Block]:
    """The markdown of ``--out`` (``conformance.md``): when and what was measured, the table, the
    differences (each with the case that shows it), the implementations skipped."""
    out: list[Block] = [Text(f"Measured {date}: {_measured(impls)}."), table]
    if found:
        out += [Text("Differences (the case that shows each):"), Bullets(list(found))]
    if skipped:
        out.append(Bullets([f"skipped: {s['impl']}: {s['reason']}" for s in skipped]))
    return out


def markdown(document: Sequence[Block]) -> str:
    """:func:`blocks` (or :func:`matrix_blocks`) in markdown, ending on its last line whatever a note's
    own text ends with."""
    return render.markdown(document).rstrip() + "\n"


# -- the cases and implementations (--list) -------------------------------------------------------------
def listing(adapters: Sequence, cases: Sequence, *, models: bool = False, whole_suite: bool = False) -> str:
    """``--list``: the cases (config, checks, why; a model case's type and source), with the whole suite the
    model battery's cases too, then each implementation, installed (its version) or missing (why)."""
    if models:
        rows = [["model case", "model type", "why", "from"]] + [[c.name, c.model_type, c.why, c.source]
                                                               for c in cases]
        lines = render.text_table(rows, "llll")
    else:
        rows = [["case", "config", "checks", "why"]]
        for c in cases:
            kind = "refuse" if c.refuse else ("vs itself: " + c.twin.describe() if c.twin is not None else "")
            rows.append([c.name, c.config.describe() + (f" ({kind})" if kind else ""), ",".join(c.checks), c.why])
        lines = render.text_table(rows, "llll")
        if whole_suite:  # every case asked for: the model battery's too
            from .models import cases as model_cases

            lines += [""] + render.text_table([["model case (--models)", "model type", "why"]]
                                              + [[c.name, c.model_type, c.why] for c in model_cases()], "lll")
    rows = [["implementation", "status", "exercises"]]
    for a in adapters:
        reason = unavailable(a)
        rows.append([a.name, f"missing: {reason}" if reason else f"installed {version(a)}".strip(), a.summary])
    return "\n".join([*lines, "", *render.text_table(rows, "lll")])


# -- over releases (--matrix) -----------------------------------------------------------------------------
def matrix_document(package: str, date: str, by_version: dict[str, Sequence[Result]]) -> dict:
    """The JSON document of ``--matrix``: every release's results."""
    return {**header(MATRIX_REPORT, REPORT_VERSION), "package": package, "date": date,
            "releases": {v: [r.to_json() for r in results] for v, results in by_version.items()}}


def matrix_blocks(doc: dict, table: Table) -> list[Block]:
    """The markdown of ``--matrix`` with ``--out``: when, which releases, the table of case x release."""
    return [Text(f"Measured {doc['date']}: {doc['package']} {', '.join(doc['releases'])}, one virtualenv each."),
            table]


def matrix_text(by_version: dict[str, Sequence[Result]], cases: Sequence, package: str, table: Table, *,
                what: str, models: bool = False) -> str:
    """What the command prints of ``--matrix``: the cases on the releases, the table, each release's counts."""
    plural = "s" if len(cases) != 1 else ""
    lines = [f"conformance: {len(cases)} {'model ' if models else ''}case{plural} on {package} "
             f"{', '.join(by_version)} {what}", *render.text_table(table)]
    for v, results in by_version.items():
        c = counts(results, package)
        lines.append(f"{package} {v}: {c['pass']} pass, {c['fail']} fail, {c['error']} error, {c['n/a']} n/a")
    return "\n".join(lines)
